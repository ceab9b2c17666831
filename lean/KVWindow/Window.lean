import KVWindow.Spec

/-!
# KVWindow.Window: the list theorems

The core equation `step_lastWindow` and everything that follows from it by
induction: `run_correct`, `pushChunk_correct` (prefill longer than the window),
the length bounds. The helper lemmas at the top are proved here from the
definitions of `List.drop`, `List.take`, `++` and `List.length`, so that no
library lemma name can drift under these proofs.
-/

namespace KVWindow

/-! ## Helper lemmas on lists (own proofs, by `rfl` and induction) -/

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

theorem drop_nil' {α : Type} : ∀ (n : Nat), ([] : List α).drop n = []
  | 0 => rfl
  | _ + 1 => rfl

theorem take_nil' {α : Type} : ∀ (n : Nat), ([] : List α).take n = []
  | 0 => rfl
  | _ + 1 => rfl

theorem append_nil' {α : Type} : ∀ (l : List α), l ++ [] = l
  | [] => rfl
  | a :: l => by rw [cons_append', append_nil' l]

theorem length_append' {α : Type} : ∀ (l m : List α), (l ++ m).length = l.length + m.length
  | [], m => by rw [nil_append', length_nil', Nat.zero_add]
  | a :: l, m => by
    rw [cons_append', length_cons', length_cons', length_append' l m]
    omega

theorem length_singleton' {α : Type} (x : α) : [x].length = 1 := rfl

theorem length_append_singleton {α : Type} (l : List α) (x : α) :
    (l ++ [x]).length = l.length + 1 := by
  have h := length_append' l [x]
  have h1 := length_singleton' x
  omega

theorem length_drop' {α : Type} : ∀ (n : Nat) (l : List α), (l.drop n).length = l.length - n
  | 0, l => by rw [drop_zero', Nat.sub_zero]
  | _ + 1, [] => by rw [drop_nil', length_nil', Nat.zero_sub]
  | n + 1, a :: l => by
    rw [drop_succ_cons', length_drop' n l, length_cons']
    omega

/-- `drop` distributes over `++` (for every `k`; Nat subtraction truncates). -/
theorem drop_append_eq {α : Type} :
    ∀ (l m : List α) (k : Nat), (l ++ m).drop k = l.drop k ++ m.drop (k - l.length)
  | [], m, k => by rw [nil_append', drop_nil', nil_append', length_nil', Nat.sub_zero]
  | a :: l, m, 0 => by simp only [drop_zero', Nat.zero_sub]
  | a :: l, m, k + 1 => by
    have e : k + 1 - (l.length + 1) = k - l.length := by omega
    rw [cons_append', drop_succ_cons', drop_succ_cons', drop_append_eq l m k, length_cons', e]

/-- `take` distributes over `++`. -/
theorem take_append_eq {α : Type} :
    ∀ (l m : List α) (k : Nat), (l ++ m).take k = l.take k ++ m.take (k - l.length)
  | [], m, k => by rw [nil_append', take_nil', nil_append', length_nil', Nat.sub_zero]
  | a :: l, m, 0 => by simp only [take_zero', Nat.zero_sub, nil_append']
  | a :: l, m, k + 1 => by
    have e : k + 1 - (l.length + 1) = k - l.length := by omega
    rw [cons_append', take_succ_cons', take_succ_cons', take_append_eq l m k, length_cons', e,
      cons_append']

theorem drop_drop' {α : Type} : ∀ (a b : Nat) (l : List α), (l.drop a).drop b = l.drop (a + b)
  | 0, b, l => by rw [drop_zero', Nat.zero_add]
  | _ + 1, _, [] => by simp only [drop_nil']
  | a + 1, b, x :: l => by
    have e : a + 1 + b = (a + b) + 1 := by omega
    rw [drop_succ_cons', drop_drop' a b l, e, drop_succ_cons']

theorem take_append_drop' {α : Type} : ∀ (n : Nat) (l : List α), l.take n ++ l.drop n = l
  | 0, _ => rfl
  | _ + 1, [] => rfl
  | n + 1, a :: l => by
    rw [take_succ_cons', drop_succ_cons', cons_append', take_append_drop' n l]

theorem length_take_of_le {α : Type} :
    ∀ (l : List α) (k : Nat), k ≤ l.length → (l.take k).length = k
  | _, 0, _ => rfl
  | [], k + 1, h => by
    have h' : k + 1 ≤ 0 := h
    exact False.elim (by omega)
  | a :: l, k + 1, h => by
    have h' : k + 1 ≤ l.length + 1 := h
    rw [take_succ_cons', length_cons', length_take_of_le l k (by omega)]

theorem take_all {α : Type} : ∀ (l : List α) (k : Nat), l.length ≤ k → l.take k = l
  | [], k, _ => take_nil' k
  | a :: l, 0, h => by
    have h' : l.length + 1 ≤ 0 := h
    exact False.elim (by omega)
  | a :: l, k + 1, h => by
    have h' : l.length + 1 ≤ k + 1 := h
    rw [take_succ_cons', take_all l k (by omega)]

theorem drop_all {α : Type} : ∀ (l : List α) (k : Nat), l.length ≤ k → l.drop k = []
  | [], k, _ => drop_nil' k
  | a :: l, 0, h => by
    have h' : l.length + 1 ≤ 0 := h
    exact False.elim (by omega)
  | a :: l, k + 1, h => by
    have h' : l.length + 1 ≤ k + 1 := h
    rw [drop_succ_cons', drop_all l k (by omega)]

theorem append_singleton_cons {α : Type} :
    ∀ (xs : List α) (y : α) (ys : List α), (xs ++ [y]) ++ ys = xs ++ (y :: ys)
  | [], _, _ => rfl
  | a :: xs, y, ys => by
    rw [cons_append', cons_append', cons_append', append_singleton_cons xs y ys]

/-! ## The window -/

theorem lastWindow_nil {α : Type} (w : Nat) : lastWindow w ([] : List α) = [] := by
  unfold lastWindow
  exact drop_nil' _

/-- The cache holds `min w n` entries. -/
theorem lastWindow_length {α : Type} (w : Nat) (xs : List α) :
    (lastWindow w xs).length = min w xs.length := by
  unfold lastWindow
  rw [length_drop']
  omega

/-- The window is a suffix of the history: nothing is reordered or invented. -/
theorem lastWindow_suffix {α : Type} (w : Nat) (xs : List α) :
    ∃ pre : List α, pre ++ lastWindow w xs = xs :=
  ⟨xs.take (xs.length - w), take_append_drop' (xs.length - w) xs⟩

/-- The core equation: stepping the window of `xs` gives the window of `xs ++ [x]`.
Both the not-yet-full case and the evicting case are covered. -/
theorem step_lastWindow {α : Type} (w : Nat) (xs : List α) (x : α) :
    step w (lastWindow w xs) x = lastWindow w (xs ++ [x]) := by
  have hlen : (xs.drop (xs.length - w) ++ [x]).length = xs.length - (xs.length - w) + 1 := by
    rw [length_append_singleton, length_drop']
  have hlen2 : (xs ++ [x]).length = xs.length + 1 := length_append_singleton xs x
  unfold step lastWindow
  rw [hlen, hlen2]
  by_cases h : w < xs.length - (xs.length - w) + 1
  · have e1 : xs.length - w + 1 = xs.length + 1 - w := by omega
    have e2 : 1 - (xs.length - (xs.length - w)) = xs.length + 1 - w - xs.length := by omega
    rw [if_pos h, drop_append_eq, drop_append_eq, drop_drop', length_drop', e1, e2]
  · have e1 : xs.length - w = 0 := by omega
    have e2 : xs.length + 1 - w = 0 := by omega
    rw [if_neg h, e1, e2, drop_zero', drop_zero']

/-- One step keeps the simulation relation. -/
theorem step_preserves_valid {α : Type} (w : Nat) (hs c : List α) (x : α)
    (h : Valid w hs c) : Valid w (hs ++ [x]) (step w c x) := by
  have hc : c = lastWindow w hs := h
  show step w c x = lastWindow w (hs ++ [x])
  rw [hc]
  exact step_lastWindow w hs x

theorem pushChunk_nil {α : Type} (w : Nat) (c : List α) : pushChunk w c [] = c := rfl

theorem pushChunk_cons {α : Type} (w : Nat) (c : List α) (y : α) (ys : List α) :
    pushChunk w c (y :: ys) = pushChunk w (step w c y) ys := rfl

/-- Prefill: a chunk of any length (also longer than `w`) pushed onto the window
of `xs` gives the window of `xs ++ ys`. -/
theorem pushChunk_correct {α : Type} (w : Nat) :
    ∀ (xs ys : List α), pushChunk w (lastWindow w xs) ys = lastWindow w (xs ++ ys)
  | xs, [] => by rw [pushChunk_nil, append_nil']
  | xs, y :: ys => by
    rw [pushChunk_cons, step_lastWindow, pushChunk_correct w (xs ++ [y]) ys,
      append_singleton_cons]

/-- The streamed cache is exactly the window of the history. -/
theorem run_correct {α : Type} (w : Nat) (xs : List α) : run w xs = lastWindow w xs := by
  have h := pushChunk_correct w ([] : List α) xs
  rw [lastWindow_nil, nil_append'] at h
  exact h

theorem run_valid {α : Type} (w : Nat) (xs : List α) : Valid w xs (run w xs) :=
  run_correct w xs

/-- Memory bound: the cache never holds more than `w` entries. -/
theorem run_length_le {α : Type} (w : Nat) (xs : List α) : (run w xs).length ≤ w := by
  rw [run_correct, lastWindow_length]
  omega

/-- Once the history is longer than the window, the cache is shorter than the
history: the next position is `xs.length`, never the cache length. -/
theorem run_length_lt_of_gt {α : Type} (w : Nat) (xs : List α) (h : w < xs.length) :
    (run w xs).length < xs.length := by
  rw [run_correct, lastWindow_length]
  omega

end KVWindow
