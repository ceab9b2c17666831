import KVWindow.Window

/-!
# KVWindow.Positions: absolute positions survive eviction

For a history whose entries carry positions `0 .. n-1`, the cache holds the
positions `n - min w n .. n-1` (`positions_lastWindow`), and consecutive
positions from a base are kept by `step` (`step_preserves_positionInvariant`).
This is why RoPE must rotate a key at its absolute position, and why the next
position is the number of tokens seen, never the cache length.
-/

namespace KVWindow

open KVList KVArith

/-- The positions the cache holds after the tokens at positions `0 .. n-1`. -/
def positionsLastWindow (w n : Nat) : List Nat :=
  natsFrom (n - min w n) (min w n)

/-- The cache holds consecutive positions `base, base+1, ...`. -/
def PositionInvariant {κ : Type} (c : List (Entry κ)) : Prop :=
  ∃ base : Nat, c.map Entry.pos = natsFrom base c.length

/-! ## `natsFrom` -/

theorem natsFrom_zero (b : Nat) : natsFrom b 0 = [] := rfl

theorem natsFrom_succ (b n : Nat) : natsFrom b (n + 1) = b :: natsFrom (b + 1) n := rfl

theorem length_natsFrom : ∀ (b n : Nat), (natsFrom b n).length = n
  | _, 0 => rfl
  | b, n + 1 => congrArg (· + 1) (length_natsFrom (b + 1) n)

theorem natsFrom_succ_right : ∀ (b n : Nat), natsFrom b (n + 1) = natsFrom b n ++ [b + n]
  | _, 0 => rfl
  | b, n + 1 => by
    have e : b + 1 + n = b + (n + 1) := by omega
    have ih := natsFrom_succ_right (b + 1) n
    rw [e] at ih
    exact congrArg (List.cons b) ih

theorem drop_natsFrom : ∀ (b n k : Nat), (natsFrom b n).drop k = natsFrom (b + k) (n - k)
  | _, _, 0 => rfl
  | b, 0, k + 1 => by
    have e : 0 - (k + 1) = 0 := by omega
    calc (natsFrom b 0).drop (k + 1) = [] := rfl
      _ = natsFrom (b + (k + 1)) 0 := rfl
      _ = natsFrom (b + (k + 1)) (0 - (k + 1)) := by rw [e]
  | b, n + 1, k + 1 => by
    have e1 : b + 1 + k = b + (k + 1) := by omega
    have e2 : n - k = n + 1 - (k + 1) := by omega
    calc (natsFrom b (n + 1)).drop (k + 1) = (natsFrom (b + 1) n).drop k := rfl
      _ = natsFrom (b + 1 + k) (n - k) := drop_natsFrom (b + 1) n k
      _ = natsFrom (b + (k + 1)) (n + 1 - (k + 1)) := by rw [e1, e2]

theorem take_natsFrom : ∀ (b n k : Nat), k ≤ n → (natsFrom b n).take k = natsFrom b k
  | _, _, 0, _ => rfl
  | _, 0, _ + 1, h => False.elim (by omega)
  | b, n + 1, k + 1, h => congrArg (List.cons b) (take_natsFrom (b + 1) n k (by omega))

theorem nthOpt_natsFrom : ∀ (b n i : Nat), i < n → nthOpt (natsFrom b n) i = some (b + i)
  | _, 0, _, h => False.elim (by omega)
  | _, _ + 1, 0, _ => rfl
  | b, n + 1, i + 1, h => by
    have e : b + 1 + i = b + (i + 1) := by omega
    calc nthOpt (natsFrom b (n + 1)) (i + 1) = nthOpt (natsFrom (b + 1) n) i := rfl
      _ = some (b + 1 + i) := nthOpt_natsFrom (b + 1) n i (by omega)
      _ = some (b + (i + 1)) := by rw [e]

/-- Two maps over `natsFrom b n` agree when the functions agree on `b .. b+n-1`. -/
theorem map_natsFrom_congr {β : Type} (f g : Nat → β) :
    ∀ (b n : Nat), (∀ i, b ≤ i → i < b + n → f i = g i) →
      (natsFrom b n).map f = (natsFrom b n).map g
  | _, 0, _ => rfl
  | b, n + 1, h => by
    have hb : f b = g b := h b (by omega) (by omega)
    have ih := map_natsFrom_congr f g (b + 1) n (fun i h1 h2 => h i (by omega) (by omega))
    calc (natsFrom b (n + 1)).map f = f b :: (natsFrom (b + 1) n).map f := rfl
      _ = g b :: (natsFrom (b + 1) n).map g := by rw [hb, ih]
      _ = (natsFrom b (n + 1)).map g := rfl

theorem map_natsFrom_shift {β : Type} (f : Nat → β) :
    ∀ (b n : Nat), (natsFrom (b + 1) n).map f = (natsFrom b n).map (fun i => f (i + 1))
  | _, 0 => rfl
  | b, n + 1 => congrArg (List.cons (f (b + 1))) (map_natsFrom_shift f (b + 1) n)

theorem nthOpt_map_natsFrom {β : Type} (f : Nat → β) :
    ∀ (b s i : Nat), i < s → nthOpt ((natsFrom b s).map f) i = some (f (b + i))
  | _, 0, _, h => False.elim (by omega)
  | _, _ + 1, 0, _ => rfl
  | b, s + 1, i + 1, h => by
    have e : b + 1 + i = b + (i + 1) := by omega
    calc nthOpt ((natsFrom b (s + 1)).map f) (i + 1) = nthOpt ((natsFrom (b + 1) s).map f) i := rfl
      _ = some (f (b + 1 + i)) := nthOpt_map_natsFrom f (b + 1) s i (by omega)
      _ = some (f (b + (i + 1))) := by rw [e]

/-- A list is the map of `g` over its indices when each element is `g` of its index. -/
theorem map_natsFrom_of_nthOpt {α : Type} (g : Nat → α) :
    ∀ (l : List α) (b : Nat), (∀ i, i < l.length → nthOpt l i = some (g (b + i))) →
      (natsFrom b l.length).map g = l
  | [], _, _ => rfl
  | a :: l, b, h => by
    have hlen : (a :: l).length = l.length + 1 := rfl
    have h0 : some a = some (g (b + 0)) := h 0 (by omega)
    have ha : a = g b := Option.some.inj h0
    have ih := map_natsFrom_of_nthOpt g l (b + 1) (fun i hi => by
      have e : b + (i + 1) = b + 1 + i := by omega
      have hi' : nthOpt l i = some (g (b + (i + 1))) := h (i + 1) (by omega)
      rw [e] at hi'
      exact hi')
    calc (natsFrom b (a :: l).length).map g = g b :: (natsFrom (b + 1) l.length).map g := rfl
      _ = a :: l := by rw [ih, ha]

theorem positionInvariant_of_map {κ : Type} (c : List (Entry κ)) (b n : Nat)
    (h : c.map Entry.pos = natsFrom b n) : PositionInvariant c := by
  have h1 := length_map' Entry.pos c
  have h2 : (c.map Entry.pos).length = n := (congrArg List.length h).trans (length_natsFrom b n)
  have hn : c.length = n := by omega
  unfold PositionInvariant
  refine ⟨b, ?_⟩
  calc c.map Entry.pos = natsFrom b n := h
    _ = natsFrom b c.length := by rw [hn]

/-! ## The theorems -/

/-- For a history of positions `0 .. n-1`, the cache holds positions
`n - min w n .. n-1`. -/
theorem positions_lastWindow {κ : Type} (w : Nat) (hs : List (Entry κ))
    (h : hs.map Entry.pos = natsFrom 0 hs.length) :
    (lastWindow w hs).map Entry.pos = positionsLastWindow w hs.length := by
  have e1 : 0 + (hs.length - w) = hs.length - min w hs.length := by omega
  have e2 : hs.length - (hs.length - w) = min w hs.length := by omega
  calc (lastWindow w hs).map Entry.pos = (hs.drop (hs.length - w)).map Entry.pos := rfl
    _ = (hs.map Entry.pos).drop (hs.length - w) := map_drop' Entry.pos (hs.length - w) hs
    _ = (natsFrom 0 hs.length).drop (hs.length - w) := by rw [h]
    _ = natsFrom (0 + (hs.length - w)) (hs.length - (hs.length - w)) :=
        drop_natsFrom 0 hs.length (hs.length - w)
    _ = natsFrom (hs.length - min w hs.length) (min w hs.length) := by rw [e1, e2]
    _ = positionsLastWindow w hs.length := rfl

/-- The same for the streamed cache. -/
theorem positions_run {κ : Type} (w : Nat) (hs : List (Entry κ))
    (h : hs.map Entry.pos = natsFrom 0 hs.length) :
    (run w hs).map Entry.pos = positionsLastWindow w hs.length := by
  calc (run w hs).map Entry.pos = (lastWindow w hs).map Entry.pos := by rw [run_correct w hs]
    _ = positionsLastWindow w hs.length := positions_lastWindow w hs h

/-- `step` keeps consecutive positions when the new entry carries the next position. -/
theorem step_preserves_positionInvariant {κ : Type} (w : Nat) (c : List (Entry κ))
    (x : Entry κ) (base : Nat) (hc : c.map Entry.pos = natsFrom base c.length)
    (hx : x.pos = base + c.length) : PositionInvariant (step w c x) := by
  have happ : (c ++ [x]).map Entry.pos = natsFrom base (c.length + 1) := by
    calc (c ++ [x]).map Entry.pos = c.map Entry.pos ++ [x.pos] := map_append' Entry.pos c [x]
      _ = natsFrom base c.length ++ [base + c.length] := by rw [hc, hx]
      _ = natsFrom base (c.length + 1) := (natsFrom_succ_right base c.length).symm
  by_cases h : w < (c ++ [x]).length
  · have hd : ((c ++ [x]).drop 1).map Entry.pos = natsFrom (base + 1) (c.length + 1 - 1) := by
      calc ((c ++ [x]).drop 1).map Entry.pos = ((c ++ [x]).map Entry.pos).drop 1 :=
            map_drop' Entry.pos 1 (c ++ [x])
        _ = (natsFrom base (c.length + 1)).drop 1 := by rw [happ]
        _ = natsFrom (base + 1) (c.length + 1 - 1) := drop_natsFrom base (c.length + 1) 1
    have hp := positionInvariant_of_map ((c ++ [x]).drop 1) (base + 1) (c.length + 1 - 1) hd
    rw [step_of_lt w c x h]
    exact hp
  · have hp := positionInvariant_of_map (c ++ [x]) base (c.length + 1) happ
    rw [step_of_not_lt w c x h]
    exact hp

end KVWindow
