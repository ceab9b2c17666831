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

/-- The positions the cache holds after the tokens at positions `0 .. n-1`. -/
def positionsLastWindow (w n : Nat) : List Nat :=
  natsFrom (n - min w n) (min w n)

/-- The cache holds consecutive positions `base, base+1, ...`. -/
def PositionInvariant {κ : Type} (c : List (Entry κ)) : Prop :=
  ∃ base : Nat, c.map Entry.pos = natsFrom base c.length

/-! ## Helper lemmas -/

theorem natsFrom_zero (b : Nat) : natsFrom b 0 = [] := rfl

theorem natsFrom_succ (b n : Nat) : natsFrom b (n + 1) = b :: natsFrom (b + 1) n := rfl

theorem length_natsFrom : ∀ (b n : Nat), (natsFrom b n).length = n
  | _, 0 => rfl
  | b, n + 1 => by rw [natsFrom_succ, length_cons', length_natsFrom (b + 1) n]

theorem natsFrom_succ_right : ∀ (b n : Nat), natsFrom b (n + 1) = natsFrom b n ++ [b + n]
  | _, 0 => rfl
  | b, n + 1 => by
    have e : b + 1 + n = b + (n + 1) := by omega
    rw [natsFrom_succ b (n + 1), natsFrom_succ_right (b + 1) n, natsFrom_succ b n, cons_append', e]

theorem drop_natsFrom : ∀ (b n k : Nat), (natsFrom b n).drop k = natsFrom (b + k) (n - k)
  | b, n, 0 => by rw [drop_zero', Nat.add_zero, Nat.sub_zero]
  | b, 0, k + 1 => by rw [natsFrom_zero, drop_nil', Nat.zero_sub, natsFrom_zero]
  | b, n + 1, k + 1 => by
    have e1 : b + 1 + k = b + (k + 1) := by omega
    have e2 : n - k = n + 1 - (k + 1) := by omega
    rw [natsFrom_succ, drop_succ_cons', drop_natsFrom (b + 1) n k, e1, e2]

theorem map_nil' {α β : Type} (f : α → β) : ([] : List α).map f = [] := rfl

theorem map_cons' {α β : Type} (f : α → β) (a : α) (l : List α) :
    (a :: l).map f = f a :: l.map f := rfl

theorem map_singleton' {α β : Type} (f : α → β) (a : α) : [a].map f = [f a] := rfl

theorem length_map' {α β : Type} (f : α → β) : ∀ (l : List α), (l.map f).length = l.length
  | [] => rfl
  | a :: l => by rw [map_cons', length_cons', length_cons', length_map' f l]

theorem map_append' {α β : Type} (f : α → β) :
    ∀ (l m : List α), (l ++ m).map f = l.map f ++ m.map f
  | [], _ => rfl
  | a :: l, m => by rw [cons_append', map_cons', map_cons', map_append' f l m, cons_append']

theorem map_drop' {α β : Type} (f : α → β) :
    ∀ (k : Nat) (l : List α), (l.drop k).map f = (l.map f).drop k
  | 0, _ => rfl
  | _ + 1, [] => rfl
  | k + 1, a :: l => by rw [drop_succ_cons', map_cons', drop_succ_cons', map_drop' f k l]

theorem cons_ne_nil' {α : Type} (a : α) (l : List α) : a :: l ≠ [] := by
  intro h
  cases h

/-- Two maps over `natsFrom b n` agree when the functions agree on `b .. b+n-1`. -/
theorem map_natsFrom_congr {β : Type} (f g : Nat → β) :
    ∀ (b n : Nat), (∀ i, b ≤ i → i < b + n → f i = g i) →
      (natsFrom b n).map f = (natsFrom b n).map g
  | _, 0, _ => rfl
  | b, n + 1, h => by
    rw [natsFrom_succ, map_cons', map_cons', h b (Nat.le_refl b) (by omega),
      map_natsFrom_congr f g (b + 1) n (fun i h1 h2 => h i (by omega) (by omega))]

theorem map_natsFrom_shift {β : Type} (f : Nat → β) :
    ∀ (b n : Nat), (natsFrom (b + 1) n).map f = (natsFrom b n).map (fun i => f (i + 1))
  | _, 0 => rfl
  | b, n + 1 => by
    rw [natsFrom_succ, natsFrom_succ, map_cons', map_cons', map_natsFrom_shift f (b + 1) n]

/-- The `i`-th element, if any. -/
def nthOpt {α : Type} : List α → Nat → Option α
  | [], _ => none
  | a :: _, 0 => some a
  | _ :: l, n + 1 => nthOpt l n

theorem nthOpt_cons_zero {α : Type} (a : α) (l : List α) : nthOpt (a :: l) 0 = some a := rfl

theorem nthOpt_cons_succ {α : Type} (a : α) (l : List α) (n : Nat) :
    nthOpt (a :: l) (n + 1) = nthOpt l n := rfl

theorem nthOpt_map_natsFrom {β : Type} (f : Nat → β) :
    ∀ (b s i : Nat), i < s → nthOpt ((natsFrom b s).map f) i = some (f (b + i))
  | _, 0, i, h => by
    have h' : i < 0 := h
    exact False.elim (by omega)
  | b, s + 1, 0, _ => by
    rw [natsFrom_succ, map_cons', nthOpt_cons_zero, Nat.add_zero]
  | b, s + 1, i + 1, h => by
    have h' : i < s := by omega
    have e : b + 1 + i = b + (i + 1) := by omega
    rw [natsFrom_succ, map_cons', nthOpt_cons_succ, nthOpt_map_natsFrom f (b + 1) s i h', e]

theorem positionInvariant_of_map {κ : Type} (c : List (Entry κ)) (b n : Nat)
    (h : c.map Entry.pos = natsFrom b n) : PositionInvariant c := by
  have hn : c.length = n := by
    rw [← length_map' Entry.pos c, h, length_natsFrom]
  show ∃ base : Nat, c.map Entry.pos = natsFrom base c.length
  rw [hn]
  exact ⟨b, h⟩

/-! ## The theorems -/

/-- For a history of positions `0 .. n-1`, the cache holds positions
`n - min w n .. n-1`. -/
theorem positions_lastWindow {κ : Type} (w : Nat) (hs : List (Entry κ))
    (h : hs.map Entry.pos = natsFrom 0 hs.length) :
    (lastWindow w hs).map Entry.pos = positionsLastWindow w hs.length := by
  have e1 : 0 + (hs.length - w) = hs.length - min w hs.length := by omega
  have e2 : hs.length - (hs.length - w) = min w hs.length := by omega
  unfold lastWindow positionsLastWindow
  rw [map_drop', h, drop_natsFrom, e1, e2]

/-- The same for the streamed cache. -/
theorem positions_run {κ : Type} (w : Nat) (hs : List (Entry κ))
    (h : hs.map Entry.pos = natsFrom 0 hs.length) :
    (run w hs).map Entry.pos = positionsLastWindow w hs.length := by
  rw [run_correct]
  exact positions_lastWindow w hs h

/-- `step` keeps consecutive positions when the new entry carries the next position. -/
theorem step_preserves_positionInvariant {κ : Type} (w : Nat) (c : List (Entry κ))
    (x : Entry κ) (base : Nat) (hc : c.map Entry.pos = natsFrom base c.length)
    (hx : x.pos = base + c.length) : PositionInvariant (step w c x) := by
  have happ : (c ++ [x]).map Entry.pos = natsFrom base (c.length + 1) := by
    rw [map_append', hc, natsFrom_succ_right, map_singleton', hx]
  unfold step
  by_cases h : w < (c ++ [x]).length
  · rw [if_pos h]
    apply positionInvariant_of_map _ (base + 1) (c.length + 1 - 1)
    rw [map_drop', happ, drop_natsFrom]
  · rw [if_neg h]
    exact positionInvariant_of_map _ base (c.length + 1) happ

end KVWindow
