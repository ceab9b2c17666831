import KVWindow.Positions

/-!
# KVWindow.Attention: which keys each query sees

The query at position `t` sees position `p` when `t - w < p ≤ t`, stated without
subtraction as `p ≤ t ∧ t < p + w` (`w` keys, itself included).

* `filter_inWindow_eq_lastWindow`: masking the full history (positions `0 .. n-1`) for
  the newest query keeps exactly the cache.
* `attention_eq`: attention computed key by key over the full history with the window
  mask (a masked key contributes nothing, as a `-∞` logit has softmax weight 0) equals
  the same computation over the streamed cache with no mask at all. Online softmax and
  the decode kernel's split-K reduction are folds of this shape; the numerics of the
  fold never enter the proof.
* `chunk_attention_eq`: in a prefill chunk, every query (not only the newest) sees
  exactly the window of its own prefix, both when masking the full history and when
  masking what the kernel holds (the cache before the chunk, then the chunk).
-/

namespace KVWindow

open KVList KVArith

/-- The query at position `t` attends to position `p`. -/
def inWindow (w t p : Nat) : Prop := p ≤ t ∧ t < p + w

instance instDecidableInWindow (w t p : Nat) : Decidable (inWindow w t p) :=
  inferInstanceAs (Decidable (p ≤ t ∧ t < p + w))

/-- The reference implementation: the full history, masked for the newest query. -/
def maskedHistory {κ : Type} (w : Nat) (hs : List (Entry κ)) : List (Entry κ) :=
  hs.filter (fun e => decide (inWindow w (hs.length - 1) e.pos))

/-- Attention through the cache (the seed's `attentionWithCache`). -/
def attentionWithCache {κ β : Type} (attn : List (Entry κ) → β) (c : List (Entry κ)) : β :=
  attn c

/-- Attention as a kernel computes it: a left fold over the keys in order, where a key
the mask hides leaves the accumulator unchanged. -/
def maskedFold {κ β : Type} (f : β → Entry κ → β) (mask : Entry κ → Bool) (init : β)
    (keys : List (Entry κ)) : β :=
  keys.foldl (guardStep f mask) init

/-! ## Filtering consecutive positions -/

/-- Filtering consecutive positions by a threshold `c ≤ p` drops a prefix. -/
theorem filter_drop_of_threshold {κ : Type} (f : Nat → Bool) (c : Nat) :
    ∀ (l : List (Entry κ)) (b : Nat), l.map Entry.pos = natsFrom b l.length →
      (∀ p, b ≤ p → p < b + l.length → (f p = true ↔ c ≤ p)) →
      l.filter (fun e => f e.pos) = l.drop (c - b)
  | [], b, _, _ => (drop_nil' (c - b)).symm
  | e :: l, b, hpos, hf => by
    have hmap : e.pos :: l.map Entry.pos = b :: natsFrom (b + 1) l.length := hpos
    have he : e.pos = b := (List.cons.inj hmap).1
    have hl : l.map Entry.pos = natsFrom (b + 1) l.length := (List.cons.inj hmap).2
    have hlen : (e :: l).length = l.length + 1 := rfl
    have ih := filter_drop_of_threshold f c l (b + 1) hl
      (fun p h1 h2 => hf p (by omega) (by omega))
    have hb := hf b (by omega) (by omega)
    by_cases hc : c ≤ b
    · have hfe : f e.pos = true := by
        rw [he]
        exact hb.2 hc
      have e1 : c - (b + 1) = 0 := by omega
      have e2 : c - b = 0 := by omega
      calc (e :: l).filter (fun x => f x.pos) = e :: l.filter (fun x => f x.pos) :=
            filter_cons_true' (fun x : Entry κ => f x.pos) e l hfe
        _ = e :: l.drop (c - (b + 1)) := congrArg (List.cons e) ih
        _ = e :: l.drop 0 := by rw [e1]
        _ = (e :: l).drop 0 := rfl
        _ = (e :: l).drop (c - b) := by rw [e2]
    · have hfe : f e.pos = false := by
        rw [he]
        cases hfb : f b with
        | false => rfl
        | true => exact absurd (hb.1 hfb) hc
      have e1 : c - b = (c - (b + 1)) + 1 := by omega
      calc (e :: l).filter (fun x => f x.pos) = l.filter (fun x => f x.pos) :=
            filter_cons_false' (fun x : Entry κ => f x.pos) e l hfe
        _ = l.drop (c - (b + 1)) := ih
        _ = (e :: l).drop ((c - (b + 1)) + 1) := rfl
        _ = (e :: l).drop (c - b) := by rw [e1]

/-- Filtering consecutive positions that all fail the test keeps nothing. -/
theorem filter_nil_of_false {κ : Type} (f : Nat → Bool) :
    ∀ (l : List (Entry κ)) (b : Nat), l.map Entry.pos = natsFrom b l.length →
      (∀ p, b ≤ p → p < b + l.length → f p = false) → l.filter (fun e => f e.pos) = []
  | [], _, _, _ => rfl
  | e :: l, b, hpos, hf => by
    have hmap : e.pos :: l.map Entry.pos = b :: natsFrom (b + 1) l.length := hpos
    have he : e.pos = b := (List.cons.inj hmap).1
    have hl : l.map Entry.pos = natsFrom (b + 1) l.length := (List.cons.inj hmap).2
    have hlen : (e :: l).length = l.length + 1 := rfl
    have hfe : f e.pos = false := by
      rw [he]
      exact hf b (by omega) (by omega)
    have ih := filter_nil_of_false f l (b + 1) hl (fun p h1 h2 => hf p (by omega) (by omega))
    calc (e :: l).filter (fun x => f x.pos) = l.filter (fun x => f x.pos) :=
          filter_cons_false' (fun x : Entry κ => f x.pos) e l hfe
      _ = [] := ih

/-- The positions of a prefix of a history of positions `0 .. n-1`. -/
theorem positions_take {κ : Type} (l : List (Entry κ)) (k : Nat)
    (h : l.map Entry.pos = natsFrom 0 l.length) (hk : k ≤ l.length) :
    (l.take k).map Entry.pos = natsFrom 0 (l.take k).length := by
  have hlen : (l.take k).length = k := length_take_of_le l k hk
  calc (l.take k).map Entry.pos = (l.map Entry.pos).take k := map_take' Entry.pos k l
    _ = (natsFrom 0 l.length).take k := by rw [h]
    _ = natsFrom 0 k := take_natsFrom 0 l.length k hk
    _ = natsFrom 0 (l.take k).length := by rw [hlen]

/-- The positions of a suffix of a history of positions `0 .. n-1`. -/
theorem positions_drop {κ : Type} (l : List (Entry κ)) (k : Nat)
    (h : l.map Entry.pos = natsFrom 0 l.length) :
    (l.drop k).map Entry.pos = natsFrom k (l.drop k).length := by
  have hlen := length_drop' k l
  have e0 : 0 + k = k := by omega
  calc (l.drop k).map Entry.pos = (l.map Entry.pos).drop k := map_drop' Entry.pos k l
    _ = (natsFrom 0 l.length).drop k := by rw [h]
    _ = natsFrom (0 + k) (l.length - k) := drop_natsFrom 0 l.length k
    _ = natsFrom k (l.drop k).length := by rw [hlen, e0]

/-! ## The newest query -/

/-- Masking the full history (positions `0 .. n-1`) for the newest query keeps
exactly the cache's window. -/
theorem filter_inWindow_eq_lastWindow {κ : Type} (w : Nat) (hs : List (Entry κ))
    (h : hs.map Entry.pos = natsFrom 0 hs.length) :
    hs.filter (fun e => decide (inWindow w (hs.length - 1) e.pos)) = lastWindow w hs := by
  have hf : ∀ p, 0 ≤ p → p < 0 + hs.length →
      (decide (inWindow w (hs.length - 1) p) = true ↔ hs.length - w ≤ p) := by
    intro p _ hp
    constructor
    · intro hd
      have hin : inWindow w (hs.length - 1) p := of_decide_eq_true hd
      have hi : p ≤ hs.length - 1 ∧ hs.length - 1 < p + w := hin
      omega
    · intro hc
      have hin : inWindow w (hs.length - 1) p :=
        (⟨by omega, by omega⟩ : p ≤ hs.length - 1 ∧ hs.length - 1 < p + w)
      exact decide_eq_true hin
  have key := filter_drop_of_threshold (fun p => decide (inWindow w (hs.length - 1) p))
    (hs.length - w) hs 0 h hf
  have e : hs.length - w - 0 = hs.length - w := by omega
  calc hs.filter (fun e => decide (inWindow w (hs.length - 1) e.pos))
      = hs.drop (hs.length - w - 0) := key
    _ = hs.drop (hs.length - w) := by rw [e]
    _ = lastWindow w hs := rfl

/-- For every attention computed as a left fold over the keys (`f`, `init`), the
reference — the whole history, each key masked for the newest query — equals the fold
over the streamed cache with no mask. -/
theorem attention_eq {κ β : Type} (f : β → Entry κ → β) (init : β) (w : Nat)
    (hs : List (Entry κ)) (h : hs.map Entry.pos = natsFrom 0 hs.length) :
    maskedFold f (fun e => decide (inWindow w (hs.length - 1) e.pos)) init hs =
      (run w hs).foldl f init := by
  calc maskedFold f (fun e => decide (inWindow w (hs.length - 1) e.pos)) init hs
      = (hs.filter (fun e => decide (inWindow w (hs.length - 1) e.pos))).foldl f init :=
        foldl_guardStep f (fun e => decide (inWindow w (hs.length - 1) e.pos)) hs init
    _ = (lastWindow w hs).foldl f init := by rw [filter_inWindow_eq_lastWindow w hs h]
    _ = (run w hs).foldl f init := by rw [run_correct w hs]

/-- The same in the seed's vocabulary, for any attention function on key lists. -/
theorem attentionWithCache_eq {κ β : Type} (attn : List (Entry κ) → β) (w : Nat)
    (hs : List (Entry κ)) (h : hs.map Entry.pos = natsFrom 0 hs.length) :
    attn (maskedHistory w hs) = attentionWithCache attn (run w hs) := by
  calc attn (maskedHistory w hs)
      = attn (hs.filter (fun e => decide (inWindow w (hs.length - 1) e.pos))) := rfl
    _ = attn (lastWindow w hs) := by rw [filter_inWindow_eq_lastWindow w hs h]
    _ = attn (run w hs) := by rw [run_correct w hs]
    _ = attentionWithCache attn (run w hs) := rfl

/-! ## Every query of a prefill chunk -/

/-- A prefill chunk `ys` after the history `hs` (positions `0 .. n-1` throughout): the
query at any position `t` of the chunk sees exactly the window of its own prefix
`(hs ++ ys).take (t + 1)`, whether the mask is applied to the cache before the chunk
followed by the chunk (what the kernel holds) or to the full history. -/
theorem chunk_attention_eq {κ : Type} (w : Nat) (hs ys : List (Entry κ))
    (h : (hs ++ ys).map Entry.pos = natsFrom 0 (hs ++ ys).length)
    (t : Nat) (ht1 : hs.length ≤ t) (ht2 : t < (hs ++ ys).length) :
    (lastWindow w hs ++ ys).filter (fun e => decide (inWindow w t e.pos)) =
        lastWindow w ((hs ++ ys).take (t + 1)) ∧
      (hs ++ ys).filter (fun e => decide (inWindow w t e.pos)) =
        lastWindow w ((hs ++ ys).take (t + 1)) := by
  have hN := length_append' hs ys
  have hk : t + 1 ≤ (hs ++ ys).length := by omega
  have htake_len : ((hs ++ ys).take (t + 1)).length = t + 1 := length_take_of_le _ _ hk
  -- keys after the query (the future) are all masked
  have hnil_after : ((hs ++ ys).drop (t + 1)).filter (fun e => decide (inWindow w t e.pos)) = [] :=
    filter_nil_of_false (fun p => decide (inWindow w t p)) _ (t + 1)
      (positions_drop (hs ++ ys) (t + 1) h)
      (fun p h1 _ => by
        have hn : ¬ inWindow w t p := by
          intro hin
          have hin' : p ≤ t ∧ t < p + w := hin
          omega
        have hd : decide (inWindow w t p) = false := decide_eq_false hn
        exact hd)
  -- up to the query, the mask is a threshold on the position
  have hthr : ∀ p, 0 ≤ p → p < 0 + ((hs ++ ys).take (t + 1)).length →
      (decide (inWindow w t p) = true ↔ t + 1 - w ≤ p) := by
    intro p _ hp
    constructor
    · intro hd
      have hin : inWindow w t p := of_decide_eq_true hd
      have hin' : p ≤ t ∧ t < p + w := hin
      omega
    · intro hc
      have hin : inWindow w t p := (⟨by omega, by omega⟩ : p ≤ t ∧ t < p + w)
      exact decide_eq_true hin
  have hprefix := filter_drop_of_threshold (fun p => decide (inWindow w t p)) (t + 1 - w)
    ((hs ++ ys).take (t + 1)) 0 (positions_take (hs ++ ys) (t + 1) h hk) hthr
  have e6 : t + 1 - w - 0 = ((hs ++ ys).take (t + 1)).length - w := by omega
  have hA : (hs ++ ys).filter (fun e => decide (inWindow w t e.pos)) =
      lastWindow w ((hs ++ ys).take (t + 1)) := by
    calc (hs ++ ys).filter (fun e => decide (inWindow w t e.pos))
        = ((hs ++ ys).take (t + 1) ++ (hs ++ ys).drop (t + 1)).filter
            (fun e => decide (inWindow w t e.pos)) := by
          rw [take_append_drop' (t + 1) (hs ++ ys)]
      _ = ((hs ++ ys).take (t + 1)).filter (fun e => decide (inWindow w t e.pos)) ++
            ((hs ++ ys).drop (t + 1)).filter (fun e => decide (inWindow w t e.pos)) :=
          filter_append' _ _ _
      _ = ((hs ++ ys).take (t + 1)).filter (fun e => decide (inWindow w t e.pos)) ++ [] := by
          rw [hnil_after]
      _ = ((hs ++ ys).take (t + 1)).filter (fun e => decide (inWindow w t e.pos)) :=
          append_nil' _
      _ = ((hs ++ ys).take (t + 1)).drop (t + 1 - w - 0) := hprefix
      _ = ((hs ++ ys).take (t + 1)).drop (((hs ++ ys).take (t + 1)).length - w) := by rw [e6]
      _ = lastWindow w ((hs ++ ys).take (t + 1)) := rfl
  -- keys evicted before the chunk are all masked, so the cache loses nothing the query sees
  have hd_le : hs.length - w ≤ (hs ++ ys).length := by omega
  have htake_d_len : ((hs ++ ys).take (hs.length - w)).length = hs.length - w :=
    length_take_of_le _ _ hd_le
  have hnil_before :
      ((hs ++ ys).take (hs.length - w)).filter (fun e => decide (inWindow w t e.pos)) = [] :=
    filter_nil_of_false (fun p => decide (inWindow w t p)) _ 0
      (positions_take (hs ++ ys) (hs.length - w) h hd_le)
      (fun p _ h2 => by
        have hn : ¬ inWindow w t p := by
          intro hin
          have hin' : p ≤ t ∧ t < p + w := hin
          omega
        have hd : decide (inWindow w t p) = false := decide_eq_false hn
        exact hd)
  have hcache : lastWindow w hs ++ ys = (hs ++ ys).drop (hs.length - w) := by
    have e0 : hs.length - w - hs.length = 0 := by omega
    calc lastWindow w hs ++ ys = hs.drop (hs.length - w) ++ ys := rfl
      _ = hs.drop (hs.length - w) ++ ys.drop 0 := rfl
      _ = hs.drop (hs.length - w) ++ ys.drop (hs.length - w - hs.length) := by rw [e0]
      _ = (hs ++ ys).drop (hs.length - w) := (drop_append_eq hs ys (hs.length - w)).symm
  have hB : (lastWindow w hs ++ ys).filter (fun e => decide (inWindow w t e.pos)) =
      (hs ++ ys).filter (fun e => decide (inWindow w t e.pos)) := by
    calc (lastWindow w hs ++ ys).filter (fun e => decide (inWindow w t e.pos))
        = ((hs ++ ys).drop (hs.length - w)).filter (fun e => decide (inWindow w t e.pos)) := by
          rw [hcache]
      _ = [] ++ ((hs ++ ys).drop (hs.length - w)).filter (fun e => decide (inWindow w t e.pos)) :=
          rfl
      _ = ((hs ++ ys).take (hs.length - w)).filter (fun e => decide (inWindow w t e.pos)) ++
            ((hs ++ ys).drop (hs.length - w)).filter (fun e => decide (inWindow w t e.pos)) := by
          rw [hnil_before]
      _ = ((hs ++ ys).take (hs.length - w) ++ (hs ++ ys).drop (hs.length - w)).filter
            (fun e => decide (inWindow w t e.pos)) := (filter_append' _ _ _).symm
      _ = (hs ++ ys).filter (fun e => decide (inWindow w t e.pos)) := by
          rw [take_append_drop' (hs.length - w) (hs ++ ys)]
  exact ⟨hB.trans hA, hA⟩

end KVWindow
