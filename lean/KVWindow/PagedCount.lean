import KVWindow.PagedModel

/-!
# KVWindow.PagedCount: tables, reference counts and membership

The facts about `upd`, `setExt`, `ind`, `countIn`, `refsIn` and `memN` the paged proofs use,
each by induction or one unfolding: writing a table entry changes the count of a block by what
the old and new entries contribute (`countIn_setExt`), replacing one live table changes the pool
count the same way (`refsIn_upd`), a referenced block has refcount ≥ 1 (two references: ≥ 2),
and refcount 0 is "no live table references it" (`refcount_zero`, `refcount_pos`).
-/

namespace KVWindow

open KVList KVArith

/-! ## `upd` -/

theorem upd_same {β : Type} (f : Nat → β) (s : Nat) (v : β) : upd f s v s = v := by
  unfold upd
  exact ite_pos' (rfl : s = s) v (f s)

theorem upd_ne {β : Type} (f : Nat → β) (s : Nat) (v : β) (t : Nat) (h : ¬ t = s) :
    upd f s v t = f t := by
  unfold upd
  exact ite_neg' h v (f t)

/-! ## `setExt` -/

theorem getSlot_setExt_same {β : Type} :
    ∀ (l : List (Option β)) (j : Nat) (y : Option β), getSlot (setExt l j y) j = y
  | [], 0, _ => rfl
  | [], j + 1, y => getSlot_setExt_same [] j y
  | _ :: _, 0, _ => rfl
  | _ :: l, j + 1, y => getSlot_setExt_same l j y

theorem getSlot_setExt_ne {β : Type} :
    ∀ (l : List (Option β)) (j k : Nat) (y : Option β), ¬ k = j →
      getSlot (setExt l j y) k = getSlot l k
  | [], 0, 0, _, h => (h rfl).elim
  | [], 0, _ + 1, _, _ => rfl
  | [], _ + 1, 0, _, _ => rfl
  | [], j + 1, k + 1, y, h => getSlot_setExt_ne [] j k y (by omega)
  | _ :: _, 0, 0, _, h => (h rfl).elim
  | _ :: _, 0, _ + 1, _, _ => rfl
  | _ :: _, _ + 1, 0, _, _ => rfl
  | _ :: l, j + 1, k + 1, y, h => getSlot_setExt_ne l j k y (by omega)

/-- The empty table has no entry. -/
theorem getSlot_nil {β : Type} (j : Nat) : getSlot ([] : List (Option β)) j = none := by
  cases j with
  | zero => rfl
  | succ _ => rfl

/-! ## `ind` and `countIn` -/

theorem ind_none (d : Nat) : ind d none = 0 := rfl

theorem ind_self (d : Nat) : ind d (some d) = 1 := by
  first
  | exact ite_pos' (rfl : d = d) 1 0
  | simp [ind]

theorem ind_ne (d c : Nat) (h : ¬ c = d) : ind d (some c) = 0 := by
  first
  | exact ite_neg' h 1 0
  | simp [ind, h]

theorem ind_of_ne (d : Nat) : ∀ (o : Option Nat), ¬ o = some d → ind d o = 0
  | none, _ => rfl
  | some c, h => ind_ne d c (fun e => h (congrArg some e))

theorem ind_of_eq (d : Nat) (o : Option Nat) (h : o = some d) : ind d o = 1 :=
  (congrArg (ind d) h).trans (ind_self d)

/-- Writing entry `j` changes the count by what the old and the new entry contribute. -/
theorem countIn_setExt (d : Nat) :
    ∀ (l : List (Option Nat)) (j : Nat) (y : Option Nat),
      countIn d (setExt l j y) + ind d (getSlot l j) = countIn d l + ind d y
  | [], 0, y => by
    have e1 : countIn d (setExt [] 0 y) = ind d y + 0 := rfl
    have e2 : ind d (getSlot ([] : List (Option Nat)) 0) = 0 := rfl
    have e3 : countIn d ([] : List (Option Nat)) = 0 := rfl
    omega
  | [], j + 1, y => by
    have ih := countIn_setExt d [] j y
    have e1 : countIn d (setExt [] (j + 1) y) = ind d none + countIn d (setExt [] j y) := rfl
    have e0 : ind d none = 0 := rfl
    have e2 : ind d (getSlot ([] : List (Option Nat)) (j + 1)) = 0 := rfl
    have e3 : ind d (getSlot ([] : List (Option Nat)) j) = 0 :=
      (congrArg (ind d) (getSlot_nil j)).trans (ind_none d)
    omega
  | o :: l, 0, y => by
    have e1 : countIn d (setExt (o :: l) 0 y) = ind d y + countIn d l := rfl
    have e2 : ind d (getSlot (o :: l) 0) = ind d o := rfl
    have e3 : countIn d (o :: l) = ind d o + countIn d l := rfl
    omega
  | o :: l, j + 1, y => by
    have ih := countIn_setExt d l j y
    have e1 : countIn d (setExt (o :: l) (j + 1) y) = ind d o + countIn d (setExt l j y) := rfl
    have e2 : ind d (getSlot (o :: l) (j + 1)) = ind d (getSlot l j) := rfl
    have e3 : countIn d (o :: l) = ind d o + countIn d l := rfl
    omega

/-- A table holding `some d` somewhere counts `d` at least once. -/
theorem countIn_pos (d : Nat) (l : List (Option Nat)) (j : Nat) (h : getSlot l j = some d) :
    1 ≤ countIn d l := by
  have e := countIn_setExt d l j none
  have e1 : ind d (getSlot l j) = 1 := ind_of_eq d _ h
  have e2 : ind d none = 0 := rfl
  omega

/-- A table holding `some d` at two entries counts `d` at least twice. -/
theorem countIn_two (d : Nat) (l : List (Option Nat)) (j k : Nat) (hj : getSlot l j = some d)
    (hk : getSlot l k = some d) (hne : ¬ k = j) : 2 ≤ countIn d l := by
  have e := countIn_setExt d l j none
  have e1 : ind d (getSlot l j) = 1 := ind_of_eq d _ hj
  have e2 : ind d none = 0 := rfl
  have hk' : getSlot (setExt l j none) k = some d := (getSlot_setExt_ne l j k none hne).trans hk
  have e3 := countIn_pos d (setExt l j none) k hk'
  omega

/-- A table with no entry `some d` counts `d` zero times. -/
theorem countIn_zero (d : Nat) :
    ∀ (l : List (Option Nat)), (∀ j, ¬ getSlot l j = some d) → countIn d l = 0
  | [], _ => rfl
  | o :: l, h => by
    have h0 : ¬ o = some d := h 0
    have e1 := ind_of_ne d o h0
    have ih := countIn_zero d l (fun j hj => h (j + 1) hj)
    have e2 : countIn d (o :: l) = ind d o + countIn d l := rfl
    omega

theorem countIn_nil (d : Nat) : countIn d [] = 0 := rfl

/-! ## `refsIn`: counts over the live tables -/

theorem refsIn_cons (tb : Nat → List (Option Nat)) (d t : Nat) (l : List Nat) :
    refsIn tb d (t :: l) = countIn d (tb t) + refsIn tb d l := rfl

/-- The count only depends on the tables of the listed sequences. -/
theorem refsIn_congr (tb1 tb2 : Nat → List (Option Nat)) (d : Nat) :
    ∀ (l : List Nat), (∀ t, InL t l → tb1 t = tb2 t) → refsIn tb1 d l = refsIn tb2 d l
  | [], _ => rfl
  | t :: l, h => by
    have h1 : tb1 t = tb2 t := h t ((inL_cons t t l).2 (Or.inl rfl))
    have ih := refsIn_congr tb1 tb2 d l (fun u hu => h u ((inL_cons u t l).2 (Or.inr hu)))
    have e1 : countIn d (tb1 t) = countIn d (tb2 t) := congrArg (countIn d) h1
    have e2 := refsIn_cons tb1 d t l
    have e3 := refsIn_cons tb2 d t l
    omega

/-- One listed table's count is part of the total. -/
theorem refsIn_ge (tb : Nat → List (Option Nat)) (d s : Nat) :
    ∀ (l : List Nat), InL s l → countIn d (tb s) ≤ refsIn tb d l
  | [], h => False.elim h
  | t :: l, h => by
    have e := refsIn_cons tb d t l
    cases (inL_cons s t l).1 h with
    | inl ht =>
      have e2 : countIn d (tb t) = countIn d (tb s) := congrArg (fun v => countIn d (tb v)) ht
      omega
    | inr hl =>
      have ih := refsIn_ge tb d s l hl
      omega

/-- Two different listed tables' counts are both part of the total. -/
theorem refsIn_ge2 (tb : Nat → List (Option Nat)) (d s u : Nat) (hsu : ¬ s = u) :
    ∀ (l : List Nat), InL s l → InL u l → countIn d (tb s) + countIn d (tb u) ≤ refsIn tb d l
  | [], h, _ => False.elim h
  | t :: l, hs, hu => by
    have e := refsIn_cons tb d t l
    cases (inL_cons s t l).1 hs with
    | inl hts =>
      cases (inL_cons u t l).1 hu with
      | inl htu => exact False.elim (hsu (hts.symm.trans htu))
      | inr hul =>
        have e2 : countIn d (tb t) = countIn d (tb s) := congrArg (fun v => countIn d (tb v)) hts
        have h3 := refsIn_ge tb d u l hul
        omega
    | inr hsl =>
      cases (inL_cons u t l).1 hu with
      | inl htu =>
        have e2 : countIn d (tb t) = countIn d (tb u) := congrArg (fun v => countIn d (tb v)) htu
        have h3 := refsIn_ge tb d s l hsl
        omega
      | inr hul =>
        have ih := refsIn_ge2 tb d s u hsu l hsl hul
        omega

/-- Replacing the table of one listed sequence (listed once) changes the total by what the old
and the new table contribute. -/
theorem refsIn_upd (tb : Nat → List (Option Nat)) (d s : Nat) (l' : List (Option Nat)) :
    ∀ (l : List Nat), NoDupL l → InL s l →
      refsIn (upd tb s l') d l + countIn d (tb s) = refsIn tb d l + countIn d l'
  | [], _, h => False.elim h
  | t :: l, hnd, hs => by
    have hnd' : ¬ InL t l ∧ NoDupL l := hnd
    have e1 := refsIn_cons (upd tb s l') d t l
    have e2 := refsIn_cons tb d t l
    by_cases hts : t = s
    · have hsl : ¬ InL s l := fun h => hnd'.1 (by rw [hts]; exact h)
      have e3 : upd tb s l' t = l' := (congrArg (upd tb s l') hts).trans (upd_same tb s l')
      have e4 : countIn d (upd tb s l' t) = countIn d l' := congrArg (countIn d) e3
      have e5 : refsIn (upd tb s l') d l = refsIn tb d l :=
        refsIn_congr (upd tb s l') tb d l (fun u hu =>
          upd_ne tb s l' u (fun hus => hsl (by rw [← hus]; exact hu)))
      have e6 : countIn d (tb t) = countIn d (tb s) := congrArg (fun v => countIn d (tb v)) hts
      omega
    · have hsl : InL s l := ((inL_cons s t l).1 hs).elim (fun h => absurd h hts) (fun h => h)
      have e3 : upd tb s l' t = tb t := upd_ne tb s l' t hts
      have e4 : countIn d (upd tb s l' t) = countIn d (tb t) := congrArg (countIn d) e3
      have ih := refsIn_upd tb d s l' l hnd'.2 hsl
      omega

/-- A sequence not listed does not count. -/
theorem refsIn_upd_out (tb : Nat → List (Option Nat)) (d s : Nat) (l' : List (Option Nat))
    (l : List Nat) (h : ¬ InL s l) : refsIn (upd tb s l') d l = refsIn tb d l :=
  refsIn_congr (upd tb s l') tb d l (fun u hu =>
    upd_ne tb s l' u (fun hus => h (by rw [← hus]; exact hu)))

/-- No listed table references `d`: the total is 0. -/
theorem refsIn_zero (tb : Nat → List (Option Nat)) (d : Nat) :
    ∀ (l : List Nat), (∀ t, InL t l → countIn d (tb t) = 0) → refsIn tb d l = 0
  | [], _ => rfl
  | t :: l, h => by
    have h0 := h t ((inL_cons t t l).2 (Or.inl rfl))
    have ih := refsIn_zero tb d l (fun u hu => h u ((inL_cons u t l).2 (Or.inr hu)))
    have e := refsIn_cons tb d t l
    omega

/-- Dropping sequences whose tables do not reference `d` keeps the total. -/
theorem refsIn_filter (tb : Nat → List (Option Nat)) (d : Nat) (f : Nat → Bool) :
    ∀ (l : List Nat), (∀ t, InL t l → f t = false → countIn d (tb t) = 0) →
      refsIn tb d (l.filter f) = refsIn tb d l
  | [], _ => rfl
  | t :: l, h => by
    have ih := refsIn_filter tb d f l (fun u hu hf => h u ((inL_cons u t l).2 (Or.inr hu)) hf)
    have e := refsIn_cons tb d t l
    cases hft : f t with
    | true =>
      have e1 : (t :: l).filter f = t :: l.filter f := filter_cons_true' f t l hft
      have e2 := refsIn_cons tb d t (l.filter f)
      calc refsIn tb d ((t :: l).filter f) = refsIn tb d (t :: l.filter f) := by rw [e1]
        _ = refsIn tb d (t :: l) := by omega
    | false =>
      have e1 : (t :: l).filter f = l.filter f := filter_cons_false' f t l hft
      have h0 : countIn d (tb t) = 0 := h t ((inL_cons t t l).2 (Or.inl rfl)) hft
      calc refsIn tb d ((t :: l).filter f) = refsIn tb d (l.filter f) := by rw [e1]
        _ = refsIn tb d (t :: l) := by omega

/-! ## `memN` -/

theorem memN_iff (s : Nat) : ∀ (l : List Nat), memN s l = true ↔ InL s l
  | [] => by
    constructor
    · intro h
      have h' : false = true := h
      cases h'
    · intro h
      exact False.elim h
  | a :: l => by
    have ih := memN_iff s l
    by_cases ha : a = s
    · have e : memN s (a :: l) = true := ite_pos' ha true (memN s l)
      constructor
      · intro _
        exact (inL_cons s a l).2 (Or.inl ha)
      · intro _
        exact e
    · have e : memN s (a :: l) = memN s l := ite_neg' ha true (memN s l)
      constructor
      · intro h
        exact (inL_cons s a l).2 (Or.inr (ih.1 (e.symm.trans h)))
      · intro h
        cases (inL_cons s a l).1 h with
        | inl h2 => exact absurd h2 ha
        | inr h2 => exact e.trans (ih.2 h2)

theorem memN_false (s : Nat) (l : List Nat) (h : ¬ memN s l = true) : ¬ InL s l :=
  fun hl => h ((memN_iff s l).2 hl)

/-! ## Reference counts of a pool -/

/-- A block a live table references has refcount ≥ 1. -/
theorem refcount_pos {α : Type} (P : Pool α) (t j b : Nat) (ht : InL t P.live)
    (h : getSlot (P.table t) j = some b) : 1 ≤ refcount P b := by
  have h1 := countIn_pos b (P.table t) j h
  have h2 := refsIn_ge P.table b t P.live ht
  have e : refcount P b = refsIn P.table b P.live := rfl
  omega

/-- Refcount 0 is "no live table references the block". -/
theorem refcount_zero {α : Type} (P : Pool α) (b : Nat) :
    refcount P b = 0 ↔ ∀ t, InL t P.live → ∀ j, ¬ getSlot (P.table t) j = some b := by
  constructor
  · intro h0 t ht j hj
    have h1 := refcount_pos P t j b ht hj
    omega
  · intro h
    exact refsIn_zero P.table b P.live (fun t ht => countIn_zero b (P.table t) (h t ht))

/-- A block referenced by two different live tables, or twice by one, has refcount ≥ 2; so a
block of refcount ≤ 1 referenced at entry `j` of `s` is referenced nowhere else. -/
theorem refcount_unique {α : Type} (P : Pool α) (s j b : Nat) (hs : InL s P.live)
    (hj : getSlot (P.table s) j = some b) (h1 : ¬ 2 ≤ refcount P b) :
    ∀ t k, InL t P.live → getSlot (P.table t) k = some b → t = s ∧ k = j := by
  intro t k ht hk
  have e : refcount P b = refsIn P.table b P.live := rfl
  by_cases hts : t = s
  · refine ⟨hts, ?_⟩
    by_cases hkj : k = j
    · exact hkj
    · have hk' : getSlot (P.table s) k = some b := by rw [← hts]; exact hk
      have h2 := countIn_two b (P.table s) j k hj hk' hkj
      have h3 := refsIn_ge P.table b s P.live hs
      omega
  · have h2 := refsIn_ge2 P.table b t s hts P.live ht hs
    have h3 := countIn_pos b (P.table t) k hk
    have h4 := countIn_pos b (P.table s) j hj
    exact False.elim (by omega)

/-! ## `Option` -/

theorem none_ne_some' {β : Type} (a : β) : ¬ (none : Option β) = some a := by
  intro h
  first
  | cases h
  | exact Option.noConfusion h

theorem bindO_none {β γ : Type} (f : β → Option γ) : bindO none f = none := rfl

theorem bindO_some {β γ : Type} (a : β) (f : β → Option γ) : bindO (some a) f = f a := rfl

end KVWindow
