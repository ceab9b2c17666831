import KVWindow.Spec
import KVWindow.Lemmas.List
import KVWindow.Lemmas.Arith

/-!
# KVWindow.Window: the list theorems

The core equation `step_lastWindow` and everything that follows from it by
induction: `run_correct`, `pushChunk_correct` (prefill longer than the window),
the length bounds, and the Hugging Face convention (`hf_convention_eq`). The generic
list lemmas these proofs use live in `KVWindow.Lemmas.List` (namespace `KVList`).
-/

namespace KVWindow

open KVList KVArith

/-! ## The two branches of `step` -/

theorem step_of_lt {α : Type} (w : Nat) (c : List α) (x : α) (h : w < (c ++ [x]).length) :
    step w c x = (c ++ [x]).drop 1 := by
  unfold step
  exact ite_pos' h _ _

theorem step_of_not_lt {α : Type} (w : Nat) (c : List α) (x : α) (h : ¬ w < (c ++ [x]).length) :
    step w c x = c ++ [x] := by
  unfold step
  exact ite_neg' h _ _

/-! ## The window -/

theorem lastWindow_nil {α : Type} (w : Nat) : lastWindow w ([] : List α) = [] := by
  unfold lastWindow
  exact drop_nil' _

/-- The cache holds `min w n` entries. -/
theorem lastWindow_length {α : Type} (w : Nat) (xs : List α) :
    (lastWindow w xs).length = min w xs.length := by
  have h := length_drop' (xs.length - w) xs
  have e : (lastWindow w xs).length = (xs.drop (xs.length - w)).length := rfl
  omega

/-- The window is a suffix of the history: nothing is reordered or invented. -/
theorem lastWindow_suffix {α : Type} (w : Nat) (xs : List α) :
    ∃ pre : List α, pre ++ lastWindow w xs = xs :=
  ⟨xs.take (xs.length - w), take_append_drop' (xs.length - w) xs⟩

/-- The core equation: stepping the window of `xs` gives the window of `xs ++ [x]`.
Both the not-yet-full case and the evicting case are covered. -/
theorem step_lastWindow {α : Type} (w : Nat) (xs : List α) (x : α) :
    step w (lastWindow w xs) x = lastWindow w (xs ++ [x]) := by
  have hlen1 := length_append_singleton (lastWindow w xs) x
  have hlen2 := lastWindow_length w xs
  have hlen3 := length_append_singleton xs x
  by_cases h : w ≤ xs.length
  · -- full: the oldest entry is evicted
    have hc : w < (lastWindow w xs ++ [x]).length := by omega
    have e : (xs ++ [x]).length - w = (xs.length - w) + 1 := by omega
    have hd : (xs ++ [x]).drop (xs.length - w) = xs.drop (xs.length - w) ++ [x] :=
      drop_append_singleton xs x (xs.length - w) (by omega)
    calc step w (lastWindow w xs) x = (lastWindow w xs ++ [x]).drop 1 := step_of_lt w _ x hc
      _ = (xs.drop (xs.length - w) ++ [x]).drop 1 := rfl
      _ = ((xs ++ [x]).drop (xs.length - w)).drop 1 := congrArg (List.drop 1) hd.symm
      _ = (xs ++ [x]).drop ((xs.length - w) + 1) := drop_drop' (xs.length - w) 1 (xs ++ [x])
      _ = (xs ++ [x]).drop ((xs ++ [x]).length - w) := by rw [e]
      _ = lastWindow w (xs ++ [x]) := rfl
  · -- not yet full: nothing is evicted
    have hc : ¬ w < (lastWindow w xs ++ [x]).length := by omega
    have e1 : xs.length - w = 0 := by omega
    have e2 : (xs ++ [x]).length - w = 0 := by omega
    calc step w (lastWindow w xs) x = lastWindow w xs ++ [x] := step_of_not_lt w _ x hc
      _ = xs.drop (xs.length - w) ++ [x] := rfl
      _ = xs.drop 0 ++ [x] := by rw [e1]
      _ = (xs ++ [x]).drop 0 := rfl
      _ = (xs ++ [x]).drop ((xs ++ [x]).length - w) := by rw [e2]
      _ = lastWindow w (xs ++ [x]) := rfl

/-- One step keeps the simulation relation. -/
theorem step_preserves_valid {α : Type} (w : Nat) (hs c : List α) (x : α)
    (h : Valid w hs c) : Valid w (hs ++ [x]) (step w c x) := by
  unfold Valid at h ⊢
  calc step w c x = step w (lastWindow w hs) x := by rw [h]
    _ = lastWindow w (hs ++ [x]) := step_lastWindow w hs x

theorem pushChunk_nil {α : Type} (w : Nat) (c : List α) : pushChunk w c [] = c := rfl

theorem pushChunk_cons {α : Type} (w : Nat) (c : List α) (y : α) (ys : List α) :
    pushChunk w c (y :: ys) = pushChunk w (step w c y) ys := rfl

/-- Prefill: a chunk of any length (also longer than `w`) pushed onto the window
of `xs` gives the window of `xs ++ ys`. -/
theorem pushChunk_correct {α : Type} (w : Nat) :
    ∀ (xs ys : List α), pushChunk w (lastWindow w xs) ys = lastWindow w (xs ++ ys)
  | xs, [] => by
    calc pushChunk w (lastWindow w xs) [] = lastWindow w xs := rfl
      _ = lastWindow w (xs ++ []) := by rw [append_nil' xs]
  | xs, y :: ys => by
    calc pushChunk w (lastWindow w xs) (y :: ys)
        = pushChunk w (step w (lastWindow w xs) y) ys := rfl
      _ = pushChunk w (lastWindow w (xs ++ [y])) ys := by rw [step_lastWindow w xs y]
      _ = lastWindow w ((xs ++ [y]) ++ ys) := pushChunk_correct w (xs ++ [y]) ys
      _ = lastWindow w (xs ++ (y :: ys)) := by rw [append_singleton_cons xs y ys]

/-- The streamed cache is exactly the window of the history. -/
theorem run_correct {α : Type} (w : Nat) (xs : List α) : run w xs = lastWindow w xs := by
  calc run w xs = pushChunk w [] xs := rfl
    _ = pushChunk w (lastWindow w ([] : List α)) xs := by rw [lastWindow_nil w]
    _ = lastWindow w ([] ++ xs) := pushChunk_correct w [] xs
    _ = lastWindow w xs := rfl

theorem run_valid {α : Type} (w : Nat) (xs : List α) : Valid w xs (run w xs) :=
  run_correct w xs

/-- Memory bound: the cache never holds more than `w` entries. -/
theorem run_length_le {α : Type} (w : Nat) (xs : List α) : (run w xs).length ≤ w := by
  have h1 : (run w xs).length = (lastWindow w xs).length := by rw [run_correct w xs]
  have h2 := lastWindow_length w xs
  omega

/-- Once the history is longer than the window, the cache is shorter than the
history: the next position is `xs.length`, never the cache length. -/
theorem run_length_lt_of_gt {α : Type} (w : Nat) (xs : List α) (h : w < xs.length) :
    (run w xs).length < xs.length := by
  have h1 : (run w xs).length = (lastWindow w xs).length := by rw [run_correct w xs]
  have h2 := lastWindow_length w xs
  omega

/-! ## The Hugging Face convention -/

/-- Hugging Face's dynamic sliding layer stores the last `w - 1` entries between steps
and attends over that plus the current token: for `w ≥ 1` that is exactly the window
of `w` over the history including the current token. -/
theorem hf_convention_eq {α : Type} (w : Nat) (hw : 1 ≤ w) (hs : List α) (x : α) :
    lastWindow (w - 1) hs ++ [x] = lastWindow w (hs ++ [x]) := by
  have hlen := length_append_singleton hs x
  have e : (hs ++ [x]).length - w = hs.length - (w - 1) := by omega
  have hd := drop_append_singleton hs x (hs.length - (w - 1)) (by omega)
  calc lastWindow (w - 1) hs ++ [x] = hs.drop (hs.length - (w - 1)) ++ [x] := rfl
    _ = (hs ++ [x]).drop (hs.length - (w - 1)) := hd.symm
    _ = (hs ++ [x]).drop ((hs ++ [x]).length - w) := by rw [e]
    _ = lastWindow w (hs ++ [x]) := rfl

end KVWindow
