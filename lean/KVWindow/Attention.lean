import KVWindow.Positions

/-!
# KVWindow.Attention: attention as a parameter

The query at position `t` sees position `p` when `t - w < p ≤ t`, stated without
subtraction as `p ≤ t ∧ t < p + w` (`w` keys, itself included). For a history of
positions `0 .. n-1` and the newest query `t = n - 1`, masking the full history
keeps exactly the cache (`filter_inWindow_eq_lastWindow`), so for *any*
attention function `attn` the masked full-history attention equals attention
over the cache (`attention_eq`). The numerics of `attn` never enter the proof.
-/

namespace KVWindow

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

/-- One filter step when the head is kept. `List.filter` unfolds on a cons to a
`match` on `f a`; three independent routes close the goal (its equation lemmas plus
the `match` reduction, core's `filter_cons_of_pos` whose list argument is explicit
in some releases and implicit in others, or the full simp set), so a change in any
one of them between Lean releases does not break the build. -/
theorem filter_cons_true' {α : Type} (f : α → Bool) (a : α) (l : List α) (h : f a = true) :
    (a :: l).filter f = a :: l.filter f := by
  first
  | (simp only [List.filter, h]; done)
  | exact List.filter_cons_of_pos (l := l) h
  | (simp [h]; done)

/-- One filter step when the head is dropped (same three routes). -/
theorem filter_cons_false' {α : Type} (f : α → Bool) (a : α) (l : List α) (h : f a = false) :
    (a :: l).filter f = l.filter f := by
  first
  | (simp only [List.filter, h]; done)
  | exact List.filter_cons_of_neg (l := l) (by rw [h]; intro e; cases e)
  | (simp [h]; done)

/-- Filtering consecutive positions by a threshold `c ≤ p` drops a prefix. -/
theorem filter_drop_of_threshold {κ : Type} (f : Nat → Bool) (c : Nat) :
    ∀ (l : List (Entry κ)) (b : Nat), l.map Entry.pos = natsFrom b l.length →
      (∀ p, b ≤ p → p < b + l.length → (f p = true ↔ c ≤ p)) →
      l.filter (fun e => f e.pos) = l.drop (c - b)
  | [], b, _, _ => by
    show ([] : List (Entry κ)) = ([] : List (Entry κ)).drop (c - b)
    rw [drop_nil']
  | e :: l, b, hpos, hf => by
    have hmap : e.pos :: l.map Entry.pos = b :: natsFrom (b + 1) l.length := hpos
    have he : e.pos = b := (List.cons.inj hmap).1
    have hl : l.map Entry.pos = natsFrom (b + 1) l.length := (List.cons.inj hmap).2
    have hlen : (e :: l).length = l.length + 1 := rfl
    have hf' : ∀ p, b + 1 ≤ p → p < b + 1 + l.length → (f p = true ↔ c ≤ p) :=
      fun p h1 h2 => hf p (by omega) (by omega)
    have ih := filter_drop_of_threshold f c l (b + 1) hl hf'
    have hb := hf b (Nat.le_refl b) (by omega)
    by_cases hc : c ≤ b
    · have hfe : f e.pos = true := by
        rw [he]
        exact hb.2 hc
      have e1 : c - (b + 1) = 0 := by omega
      have e2 : c - b = 0 := by omega
      rw [filter_cons_true' (fun x : Entry κ => f x.pos) e l hfe, ih, e1, e2, drop_zero',
        drop_zero']
    · have hfe : f e.pos = false := by
        rw [he]
        cases hfb : f b
        · rfl
        · exact absurd (hb.1 hfb) hc
      have e1 : c - b = (c - (b + 1)) + 1 := by omega
      rw [filter_cons_false' (fun x : Entry κ => f x.pos) e l hfe, ih, e1, drop_succ_cons']

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
      have hw : inWindow w (hs.length - 1) p := of_decide_eq_true hd
      have hi : p ≤ hs.length - 1 ∧ hs.length - 1 < p + w := hw
      obtain ⟨_, h2⟩ := hi
      omega
    · intro hc
      apply decide_eq_true
      show p ≤ hs.length - 1 ∧ hs.length - 1 < p + w
      exact ⟨by omega, by omega⟩
  have key := filter_drop_of_threshold (fun p => decide (inWindow w (hs.length - 1) p))
    (hs.length - w) hs 0 h hf
  rw [Nat.sub_zero] at key
  exact key

/-- For every attention function `attn` (softmax or anything else), attention over
the masked full history equals attention over the streamed cache. -/
theorem attention_eq {κ β : Type} (attn : List (Entry κ) → β) (w : Nat) (hs : List (Entry κ))
    (h : hs.map Entry.pos = natsFrom 0 hs.length) :
    attn (hs.filter (fun e => decide (inWindow w (hs.length - 1) e.pos))) = attn (run w hs) := by
  rw [filter_inWindow_eq_lastWindow w hs h, run_correct]

/-- The same in the seed's vocabulary. -/
theorem attentionWithCache_eq {κ β : Type} (attn : List (Entry κ) → β) (w : Nat)
    (hs : List (Entry κ)) (h : hs.map Entry.pos = natsFrom 0 hs.length) :
    attn (maskedHistory w hs) = attentionWithCache attn (run w hs) :=
  attention_eq attn w hs h

end KVWindow
