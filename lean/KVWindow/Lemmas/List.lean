import KVWindow.Lemmas.Arith

/-!
# KVWindow.Lemmas.List: generic list lemmas

Facts about `++`, `take`, `drop`, `map`, `filter`, `foldl` and list indexing that the
window theorems use, proved here from the definitions (by `rfl`, induction, `congrArg`
and `omega`), so that no library lemma name can drift under them. Namespace `KVList`,
outside the public `KVWindow` namespace; the `KVWindow` files `open KVList`.

Every recursive case is closed either by `congrArg (List.cons a) ih` (the two sides are
the same list after one unfolding) or by a `calc` whose `rw` steps rewrite a hypothesis
until both sides are syntactically equal, never by a chain that depends on which
occurrence `rw` finds first.
-/

namespace KVList

open KVArith

/-! ## One-step unfoldings (`rfl`) -/

theorem nil_append' {α : Type} (l : List α) : [] ++ l = l := rfl

theorem cons_append' {α : Type} (a : α) (l m : List α) : (a :: l) ++ m = a :: (l ++ m) := rfl

theorem length_nil' {α : Type} : ([] : List α).length = 0 := rfl

theorem length_cons' {α : Type} (a : α) (l : List α) : (a :: l).length = l.length + 1 := rfl

theorem drop_zero' {α : Type} (l : List α) : l.drop 0 = l := rfl

theorem drop_succ_cons' {α : Type} (a : α) (l : List α) (n : Nat) :
    (a :: l).drop (n + 1) = l.drop n := rfl

theorem drop_one_cons {α : Type} (a : α) (l : List α) : (a :: l).drop 1 = l := rfl

theorem take_zero' {α : Type} (l : List α) : l.take 0 = [] := rfl

theorem take_succ_cons' {α : Type} (a : α) (l : List α) (n : Nat) :
    (a :: l).take (n + 1) = a :: l.take n := rfl

theorem map_nil' {α β : Type} (f : α → β) : ([] : List α).map f = [] := rfl

theorem map_cons' {α β : Type} (f : α → β) (a : α) (l : List α) :
    (a :: l).map f = f a :: l.map f := rfl

theorem map_singleton' {α β : Type} (f : α → β) (a : α) : [a].map f = [f a] := rfl

theorem length_singleton' {α : Type} (x : α) : [x].length = 1 := rfl

theorem drop_nil' {α : Type} : ∀ (n : Nat), ([] : List α).drop n = []
  | 0 => rfl
  | _ + 1 => rfl

theorem take_nil' {α : Type} : ∀ (n : Nat), ([] : List α).take n = []
  | 0 => rfl
  | _ + 1 => rfl

theorem cons_ne_nil' {α : Type} (a : α) (l : List α) : a :: l ≠ [] := by
  intro h
  cases h

/-! ## Append and length -/

theorem append_nil' {α : Type} : ∀ (l : List α), l ++ [] = l
  | [] => rfl
  | a :: l => congrArg (List.cons a) (append_nil' l)

theorem length_append' {α : Type} : ∀ (l m : List α), (l ++ m).length = l.length + m.length
  | [], m => by
    have e1 : ([] ++ m).length = m.length := rfl
    have e2 : ([] : List α).length = 0 := rfl
    omega
  | a :: l, m => by
    have ih := length_append' l m
    have e1 : ((a :: l) ++ m).length = (l ++ m).length + 1 := rfl
    have e2 : (a :: l).length = l.length + 1 := rfl
    omega

theorem length_append_singleton {α : Type} (l : List α) (x : α) :
    (l ++ [x]).length = l.length + 1 := by
  have h := length_append' l [x]
  have h1 : [x].length = 1 := rfl
  omega

theorem append_singleton_cons {α : Type} :
    ∀ (xs : List α) (y : α) (ys : List α), (xs ++ [y]) ++ ys = xs ++ (y :: ys)
  | [], _, _ => rfl
  | a :: xs, y, ys => congrArg (List.cons a) (append_singleton_cons xs y ys)

/-! ## drop and take -/

theorem length_drop' {α : Type} : ∀ (n : Nat) (l : List α), (l.drop n).length = l.length - n
  | 0, l => by
    have e : (l.drop 0).length = l.length := rfl
    omega
  | n + 1, [] => by
    have e1 : (([] : List α).drop (n + 1)).length = 0 := rfl
    have e2 : ([] : List α).length = 0 := rfl
    omega
  | n + 1, a :: l => by
    have ih := length_drop' n l
    have e1 : ((a :: l).drop (n + 1)).length = (l.drop n).length := rfl
    have e2 : (a :: l).length = l.length + 1 := rfl
    omega

/-- `drop` distributes over `++` (for every `k`; Nat subtraction truncates). -/
theorem drop_append_eq {α : Type} :
    ∀ (l m : List α) (k : Nat), (l ++ m).drop k = l.drop k ++ m.drop (k - l.length)
  | [], m, k => by
    have e2 : k - ([] : List α).length = k := rfl
    calc ([] ++ m).drop k = [] ++ m.drop k := rfl
      _ = ([] : List α).drop k ++ m.drop k := by rw [drop_nil' k]
      _ = ([] : List α).drop k ++ m.drop (k - ([] : List α).length) := by rw [e2]
  | a :: l, m, 0 => by
    have e : 0 - (a :: l).length = 0 := by omega
    calc ((a :: l) ++ m).drop 0 = (a :: l).drop 0 ++ m.drop 0 := rfl
      _ = (a :: l).drop 0 ++ m.drop (0 - (a :: l).length) := by rw [e]
  | a :: l, m, k + 1 => by
    have ih := drop_append_eq l m k
    have e : k + 1 - (a :: l).length = k - l.length := by
      have e0 : (a :: l).length = l.length + 1 := rfl
      omega
    calc ((a :: l) ++ m).drop (k + 1) = (l ++ m).drop k := rfl
      _ = l.drop k ++ m.drop (k - l.length) := ih
      _ = (a :: l).drop (k + 1) ++ m.drop (k - l.length) := rfl
      _ = (a :: l).drop (k + 1) ++ m.drop (k + 1 - (a :: l).length) := by rw [e]

/-- `take` distributes over `++`. -/
theorem take_append_eq {α : Type} :
    ∀ (l m : List α) (k : Nat), (l ++ m).take k = l.take k ++ m.take (k - l.length)
  | [], m, k => by
    have e2 : k - ([] : List α).length = k := rfl
    calc ([] ++ m).take k = [] ++ m.take k := rfl
      _ = ([] : List α).take k ++ m.take k := by rw [take_nil' k]
      _ = ([] : List α).take k ++ m.take (k - ([] : List α).length) := by rw [e2]
  | a :: l, m, 0 => by
    have e : 0 - (a :: l).length = 0 := by omega
    calc ((a :: l) ++ m).take 0 = (a :: l).take 0 ++ m.take 0 := rfl
      _ = (a :: l).take 0 ++ m.take (0 - (a :: l).length) := by rw [e]
  | a :: l, m, k + 1 => by
    have ih := take_append_eq l m k
    have e : k + 1 - (a :: l).length = k - l.length := by
      have e0 : (a :: l).length = l.length + 1 := rfl
      omega
    calc ((a :: l) ++ m).take (k + 1) = a :: (l ++ m).take k := rfl
      _ = a :: (l.take k ++ m.take (k - l.length)) := congrArg (List.cons a) ih
      _ = (a :: l).take (k + 1) ++ m.take (k - l.length) := rfl
      _ = (a :: l).take (k + 1) ++ m.take (k + 1 - (a :: l).length) := by rw [e]

theorem drop_drop' {α : Type} : ∀ (a b : Nat) (l : List α), (l.drop a).drop b = l.drop (a + b)
  | 0, b, l => by
    have e : 0 + b = b := by omega
    calc (l.drop 0).drop b = l.drop b := rfl
      _ = l.drop (0 + b) := by rw [e]
  | a + 1, b, [] => by
    calc (([] : List α).drop (a + 1)).drop b = ([] : List α).drop b := rfl
      _ = [] := drop_nil' b
      _ = ([] : List α).drop (a + 1 + b) := (drop_nil' (a + 1 + b)).symm
  | a + 1, b, x :: l => by
    have e : a + 1 + b = (a + b) + 1 := by omega
    calc ((x :: l).drop (a + 1)).drop b = (l.drop a).drop b := rfl
      _ = l.drop (a + b) := drop_drop' a b l
      _ = (x :: l).drop ((a + b) + 1) := rfl
      _ = (x :: l).drop (a + 1 + b) := by rw [e]

theorem take_append_drop' {α : Type} : ∀ (n : Nat) (l : List α), l.take n ++ l.drop n = l
  | 0, _ => rfl
  | _ + 1, [] => rfl
  | n + 1, a :: l => congrArg (List.cons a) (take_append_drop' n l)

theorem length_take_of_le {α : Type} :
    ∀ (l : List α) (k : Nat), k ≤ l.length → (l.take k).length = k
  | _, 0, _ => rfl
  | [], k + 1, h => by
    have e : ([] : List α).length = 0 := rfl
    exact False.elim (by omega)
  | a :: l, k + 1, h => by
    have e1 : (a :: l).length = l.length + 1 := rfl
    have ih := length_take_of_le l k (by omega)
    have e2 : ((a :: l).take (k + 1)).length = (l.take k).length + 1 := rfl
    omega

theorem take_all {α : Type} : ∀ (l : List α) (k : Nat), l.length ≤ k → l.take k = l
  | [], k, _ => take_nil' k
  | a :: l, 0, h => by
    have e : (a :: l).length = l.length + 1 := rfl
    exact False.elim (by omega)
  | a :: l, k + 1, h => by
    have e : (a :: l).length = l.length + 1 := rfl
    exact congrArg (List.cons a) (take_all l k (by omega))

theorem drop_all {α : Type} : ∀ (l : List α) (k : Nat), l.length ≤ k → l.drop k = []
  | [], k, _ => drop_nil' k
  | a :: l, 0, h => by
    have e : (a :: l).length = l.length + 1 := rfl
    exact False.elim (by omega)
  | a :: l, k + 1, h => by
    have e : (a :: l).length = l.length + 1 := rfl
    exact drop_all l k (by omega)

/-- Dropping at most `l.length` from `l ++ [x]` keeps `x` last. -/
theorem drop_append_singleton {α : Type} :
    ∀ (l : List α) (x : α) (k : Nat), k ≤ l.length → (l ++ [x]).drop k = l.drop k ++ [x]
  | _, _, 0, _ => rfl
  | [], _, k + 1, h => by
    have e : ([] : List α).length = 0 := rfl
    exact False.elim (by omega)
  | a :: l, x, k + 1, h => by
    have e : (a :: l).length = l.length + 1 := rfl
    exact drop_append_singleton l x k (by omega)

/-! ## map -/

theorem length_map' {α β : Type} (f : α → β) : ∀ (l : List α), (l.map f).length = l.length
  | [] => rfl
  | _ :: l => congrArg (· + 1) (length_map' f l)

theorem map_append' {α β : Type} (f : α → β) :
    ∀ (l m : List α), (l ++ m).map f = l.map f ++ m.map f
  | [], _ => rfl
  | a :: l, m => congrArg (List.cons (f a)) (map_append' f l m)

theorem map_append_singleton' {α β : Type} (f : α → β) (l : List α) (a : α) :
    (l ++ [a]).map f = l.map f ++ [f a] :=
  map_append' f l [a]

theorem map_drop' {α β : Type} (f : α → β) :
    ∀ (k : Nat) (l : List α), (l.drop k).map f = (l.map f).drop k
  | 0, _ => rfl
  | _ + 1, [] => rfl
  | k + 1, _ :: l => map_drop' f k l

theorem map_take' {α β : Type} (f : α → β) :
    ∀ (k : Nat) (l : List α), (l.take k).map f = (l.map f).take k
  | 0, _ => rfl
  | _ + 1, [] => rfl
  | k + 1, a :: l => congrArg (List.cons (f a)) (map_take' f k l)

/-! ## filter

`List.filter` unfolds on a cons to a `match` on `f a`. The two one-step lemmas try
several routes (core's own proof `rw [List.filter, h]`, the `simp` set of its equations,
core's `filter_cons_of_pos`/`_neg`, whose list argument is explicit in some releases and
implicit in others, then the full simp set), so a change in any one of them between Lean
releases does not break the build. -/

theorem filter_cons_true' {α : Type} (f : α → Bool) (a : α) (l : List α) (h : f a = true) :
    (a :: l).filter f = a :: l.filter f := by
  first
  | (rw [List.filter, h]; done)
  | (simp only [List.filter, h]; done)
  | exact List.filter_cons_of_pos (l := l) h
  | exact List.filter_cons_of_pos l h
  | (simp [h]; done)

theorem filter_cons_false' {α : Type} (f : α → Bool) (a : α) (l : List α) (h : f a = false) :
    (a :: l).filter f = l.filter f := by
  first
  | (rw [List.filter, h]; done)
  | (simp only [List.filter, h]; done)
  | exact List.filter_cons_of_neg (l := l) (by rw [h]; intro e; cases e)
  | exact List.filter_cons_of_neg l (by rw [h]; intro e; cases e)
  | (simp [h]; done)

theorem filter_append' {α : Type} (f : α → Bool) :
    ∀ (l m : List α), (l ++ m).filter f = l.filter f ++ m.filter f
  | [], _ => rfl
  | a :: l, m => by
    have ih := filter_append' f l m
    cases hfa : f a with
    | true =>
      calc ((a :: l) ++ m).filter f = (a :: (l ++ m)).filter f := rfl
        _ = a :: (l ++ m).filter f := filter_cons_true' f a (l ++ m) hfa
        _ = a :: (l.filter f ++ m.filter f) := congrArg (List.cons a) ih
        _ = (a :: l.filter f) ++ m.filter f := rfl
        _ = (a :: l).filter f ++ m.filter f := by rw [filter_cons_true' f a l hfa]
    | false =>
      calc ((a :: l) ++ m).filter f = (a :: (l ++ m)).filter f := rfl
        _ = (l ++ m).filter f := filter_cons_false' f a (l ++ m) hfa
        _ = l.filter f ++ m.filter f := ih
        _ = (a :: l).filter f ++ m.filter f := by rw [filter_cons_false' f a l hfa]

/-! ## A fold that skips what a predicate rejects -/

/-- One step of a left fold that applies `f` only where `p` holds. -/
def guardStep {α β : Type} (f : β → α → β) (p : α → Bool) (acc : β) (a : α) : β :=
  if p a = true then f acc a else acc

/-- Folding with the guard is folding over the filtered list. -/
theorem foldl_guardStep {α β : Type} (f : β → α → β) (p : α → Bool) :
    ∀ (l : List α) (init : β), l.foldl (guardStep f p) init = (l.filter p).foldl f init
  | [], _ => rfl
  | a :: l, init => by
    cases hpa : p a with
    | true =>
      have hg : guardStep f p init a = f init a :=
        (rfl : guardStep f p init a = (if p a = true then f init a else init)).trans
          (ite_pos' hpa (f init a) init)
      calc (a :: l).foldl (guardStep f p) init
          = l.foldl (guardStep f p) (guardStep f p init a) := rfl
        _ = l.foldl (guardStep f p) (f init a) := by rw [hg]
        _ = (l.filter p).foldl f (f init a) := foldl_guardStep f p l (f init a)
        _ = (a :: l.filter p).foldl f init := rfl
        _ = ((a :: l).filter p).foldl f init := by rw [filter_cons_true' p a l hpa]
    | false =>
      have hne : ¬ (p a = true) := by
        intro hc
        rw [hpa] at hc
        cases hc
      have hg : guardStep f p init a = init :=
        (rfl : guardStep f p init a = (if p a = true then f init a else init)).trans
          (ite_neg' hne (f init a) init)
      calc (a :: l).foldl (guardStep f p) init
          = l.foldl (guardStep f p) (guardStep f p init a) := rfl
        _ = l.foldl (guardStep f p) init := by rw [hg]
        _ = (l.filter p).foldl f init := foldl_guardStep f p l init
        _ = ((a :: l).filter p).foldl f init := by rw [filter_cons_false' p a l hpa]

/-! ## Indexing -/

/-- The `i`-th element, if any. -/
def nthOpt {α : Type} : List α → Nat → Option α
  | [], _ => none
  | a :: _, 0 => some a
  | _ :: l, n + 1 => nthOpt l n

theorem nthOpt_cons_zero {α : Type} (a : α) (l : List α) : nthOpt (a :: l) 0 = some a := rfl

theorem nthOpt_cons_succ {α : Type} (a : α) (l : List α) (n : Nat) :
    nthOpt (a :: l) (n + 1) = nthOpt l n := rfl

/-- Indexing past a dropped prefix. -/
theorem nthOpt_drop {α : Type} : ∀ (l : List α) (d i : Nat), nthOpt (l.drop d) i = nthOpt l (d + i)
  | l, 0, i => by
    have e : 0 + i = i := by omega
    calc nthOpt (l.drop 0) i = nthOpt l i := rfl
      _ = nthOpt l (0 + i) := by rw [e]
  | [], d + 1, i => by
    calc nthOpt (([] : List α).drop (d + 1)) i = none := rfl
      _ = nthOpt ([] : List α) (d + 1 + i) := rfl
  | a :: l, d + 1, i => by
    have e : d + 1 + i = (d + i) + 1 := by omega
    calc nthOpt ((a :: l).drop (d + 1)) i = nthOpt (l.drop d) i := rfl
      _ = nthOpt l (d + i) := nthOpt_drop l d i
      _ = nthOpt (a :: l) ((d + i) + 1) := rfl
      _ = nthOpt (a :: l) (d + 1 + i) := by rw [e]

/-- Indexing the left part of an append. -/
theorem nthOpt_append_lt {α : Type} :
    ∀ (l m : List α) (i : Nat), i < l.length → nthOpt (l ++ m) i = nthOpt l i
  | [], _, i, h => by
    have e : ([] : List α).length = 0 := rfl
    exact False.elim (by omega)
  | _ :: _, _, 0, _ => rfl
  | a :: l, m, i + 1, h => by
    have e : (a :: l).length = l.length + 1 := rfl
    exact nthOpt_append_lt l m i (by omega)

/-- Indexing the right part of an append. -/
theorem nthOpt_append_right {α : Type} :
    ∀ (l m : List α) (j : Nat), nthOpt (l ++ m) (l.length + j) = nthOpt m j
  | [], m, j => by
    have e : ([] : List α).length + j = j := by
      have e0 : ([] : List α).length = 0 := rfl
      omega
    calc nthOpt ([] ++ m) (([] : List α).length + j) = nthOpt m (([] : List α).length + j) := rfl
      _ = nthOpt m j := by rw [e]
  | a :: l, m, j => by
    have e : (a :: l).length + j = (l.length + j) + 1 := by
      have e0 : (a :: l).length = l.length + 1 := rfl
      omega
    calc nthOpt ((a :: l) ++ m) ((a :: l).length + j)
        = nthOpt ((a :: l) ++ m) ((l.length + j) + 1) := by rw [e]
      _ = nthOpt (l ++ m) (l.length + j) := rfl
      _ = nthOpt m j := nthOpt_append_right l m j

/-- The element appended last sits at index `l.length`. -/
theorem nthOpt_append_len {α : Type} (l : List α) (x : α) : nthOpt (l ++ [x]) l.length = some x :=
  nthOpt_append_right l [x] 0

/-- An element of a mapped list comes from an element of the list. -/
theorem nthOpt_map_eq_some {α β : Type} (f : α → β) :
    ∀ (l : List α) (i : Nat) (b : β), nthOpt (l.map f) i = some b →
      ∃ a, nthOpt l i = some a ∧ f a = b
  | [], _, b, h => by
    have h' : (none : Option β) = some b := h
    first
    | cases h'
    | exact Option.noConfusion h'
    | exact absurd h' (fun hc => Option.noConfusion hc)
  | a :: _, 0, b, h => by
    have h' : some (f a) = some b := h
    exact ⟨a, rfl, Option.some.inj h'⟩
  | _ :: l, i + 1, b, h => nthOpt_map_eq_some f l i b h

/-- Reading a list of filled slots (`map some`) back. -/
theorem nthOpt_map_some {α : Type} :
    ∀ (l : List α) (i : Nat) (o : Option α), nthOpt (l.map some) i = some o → nthOpt l i = o
  | [], _, o, h => by
    have h' : (none : Option (Option α)) = some o := h
    first
    | cases h'
    | exact Option.noConfusion h'
    | exact absurd h' (fun hc => Option.noConfusion hc)
  | a :: _, 0, o, h => by
    have h' : some (some a) = some o := h
    exact Option.some.inj h'
  | _ :: l, i + 1, o, h => nthOpt_map_some l i o h

/-- Indexing a mapped list. -/
theorem nthOpt_map' {α β : Type} (f : α → β) :
    ∀ (l : List α) (i : Nat), nthOpt (l.map f) i = (nthOpt l i).map f
  | [], _ => rfl
  | _ :: _, 0 => rfl
  | _ :: l, i + 1 => nthOpt_map' f l i

/-- Every index below the length holds an element. -/
theorem nthOpt_lt_some {α : Type} :
    ∀ (l : List α) (i : Nat), i < l.length → ∃ x, nthOpt l i = some x
  | [], _, h => by
    have e : ([] : List α).length = 0 := rfl
    exact False.elim (by omega)
  | a :: _, 0, _ => ⟨a, rfl⟩
  | b :: l, i + 1, h => by
    have e : (b :: l).length = l.length + 1 := rfl
    exact nthOpt_lt_some l i (by omega)

/-- Indexing below `k` is not affected by `take k`. -/
theorem nthOpt_take' {α : Type} :
    ∀ (l : List α) (k i : Nat), i < k → nthOpt (l.take k) i = nthOpt l i
  | [], k, _, _ => by rw [take_nil' k]
  | _ :: _, 0, _, h => False.elim (by omega)
  | _ :: _, _ + 1, 0, _ => rfl
  | _ :: l, k + 1, i + 1, h => nthOpt_take' l k i (by omega)

/-! ## Membership and lists without repeats (own definitions, so that no core `List.Mem`
or `List.Nodup` lemma name is needed; the free list of `KVWindow.Paged` uses them) -/

/-- `x` occurs in the list. -/
def InL {α : Type} (x : α) : List α → Prop
  | [] => False
  | a :: l => a = x ∨ InL x l

/-- No element occurs twice. -/
def NoDupL {α : Type} : List α → Prop
  | [] => True
  | a :: l => ¬ InL a l ∧ NoDupL l

theorem inL_nil {α : Type} (x : α) : ¬ InL x ([] : List α) := fun h => h

theorem inL_cons {α : Type} (x a : α) (l : List α) : InL x (a :: l) ↔ (a = x ∨ InL x l) :=
  Iff.rfl

theorem noDupL_cons {α : Type} (a : α) (l : List α) : NoDupL (a :: l) ↔ (¬ InL a l ∧ NoDupL l) :=
  Iff.rfl

theorem inL_append_singleton {α : Type} (x y : α) :
    ∀ (l : List α), InL x (l ++ [y]) ↔ (InL x l ∨ y = x)
  | [] => by
    constructor
    · intro h
      have h' : y = x ∨ InL x ([] : List α) := h
      cases h' with
      | inl e => exact Or.inr e
      | inr h2 => exact False.elim h2
    · intro h
      cases h with
      | inl h2 => exact False.elim h2
      | inr e =>
        have r : y = x ∨ InL x ([] : List α) := Or.inl e
        exact r
  | a :: l => by
    have ih := inL_append_singleton x y l
    constructor
    · intro h
      have h' : a = x ∨ InL x (l ++ [y]) := h
      cases h' with
      | inl e => exact Or.inl ((inL_cons x a l).2 (Or.inl e))
      | inr h2 =>
        cases ih.1 h2 with
        | inl h3 => exact Or.inl ((inL_cons x a l).2 (Or.inr h3))
        | inr e => exact Or.inr e
    · intro h
      have r : a = x ∨ InL x (l ++ [y]) := by
        cases h with
        | inl h2 =>
          cases (inL_cons x a l).1 h2 with
          | inl e => exact Or.inl e
          | inr h3 => exact Or.inr (ih.2 (Or.inl h3))
        | inr e => exact Or.inr (ih.2 (Or.inr e))
      exact r

theorem noDupL_append_singleton {α : Type} (y : α) :
    ∀ (l : List α), NoDupL l → ¬ InL y l → NoDupL (l ++ [y])
  | [], _, _ => by
    have r : ¬ InL y ([] : List α) ∧ NoDupL ([] : List α) := ⟨inL_nil y, trivial⟩
    exact r
  | a :: l, h, hy => by
    have h' : ¬ InL a l ∧ NoDupL l := h
    have hy' : ¬ (a = y ∨ InL y l) := hy
    have ih := noDupL_append_singleton y l h'.2 (fun hm => hy' (Or.inr hm))
    have r : ¬ InL a (l ++ [y]) ∧ NoDupL (l ++ [y]) := by
      refine ⟨?_, ih⟩
      intro hm
      cases (inL_append_singleton a y l).1 hm with
      | inl h2 => exact h'.1 h2
      | inr e => exact hy' (Or.inl e.symm)
    exact r

theorem inL_filter {α : Type} (f : α → Bool) (x : α) :
    ∀ (l : List α), InL x (l.filter f) ↔ (InL x l ∧ f x = true)
  | [] => by
    have e : ([] : List α).filter f = [] := rfl
    rw [e]
    constructor
    · intro h
      exact False.elim h
    · intro h
      exact False.elim h.1
  | a :: l => by
    have ih := inL_filter f x l
    cases hfa : f a with
    | true =>
      rw [filter_cons_true' f a l hfa]
      constructor
      · intro h
        cases (inL_cons x a (l.filter f)).1 h with
        | inl e =>
          have hx : f x = true := (congrArg f e).symm.trans hfa
          exact ⟨(inL_cons x a l).2 (Or.inl e), hx⟩
        | inr h2 => exact ⟨(inL_cons x a l).2 (Or.inr (ih.1 h2).1), (ih.1 h2).2⟩
      · intro h
        cases (inL_cons x a l).1 h.1 with
        | inl e => exact (inL_cons x a (l.filter f)).2 (Or.inl e)
        | inr h2 => exact (inL_cons x a (l.filter f)).2 (Or.inr (ih.2 ⟨h2, h.2⟩))
    | false =>
      rw [filter_cons_false' f a l hfa]
      constructor
      · intro h
        exact ⟨(inL_cons x a l).2 (Or.inr (ih.1 h).1), (ih.1 h).2⟩
      · intro h
        cases (inL_cons x a l).1 h.1 with
        | inl e =>
          have hx : f a = true := (congrArg f e).trans h.2
          have hc : false = true := hfa.symm.trans hx
          exact False.elim (by first | cases hc | exact absurd hc (by decide))
        | inr h2 => exact ih.2 ⟨h2, h.2⟩

theorem noDupL_filter {α : Type} (f : α → Bool) :
    ∀ (l : List α), NoDupL l → NoDupL (l.filter f)
  | [], _ => by
    have e : ([] : List α).filter f = [] := rfl
    rw [e]
    exact trivial
  | a :: l, h => by
    have h' : ¬ InL a l ∧ NoDupL l := h
    have ih := noDupL_filter f l h'.2
    cases hfa : f a with
    | true =>
      rw [filter_cons_true' f a l hfa]
      have r : ¬ InL a (l.filter f) ∧ NoDupL (l.filter f) :=
        ⟨fun hm => h'.1 ((inL_filter f a l).1 hm).1, ih⟩
      exact r
    | false =>
      rw [filter_cons_false' f a l hfa]
      exact ih

end KVList
