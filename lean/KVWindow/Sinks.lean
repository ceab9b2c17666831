import KVWindow.Window

/-!
# KVWindow.Sinks: attention sinks (StreamingLLM)

`sinkWindow s w hs` keeps the first `s` entries forever (the sinks) plus the
last `w - s` of the rest. `sinkStep` fills the sinks first, then slides the rest
with the plain `step (w - s)`. `sinkStep_correct` is the core equation;
`sinkRun_correct` lifts it to streams.
-/

namespace KVWindow

open KVList KVArith

def sinkWindow {α : Type} (s w : Nat) (hs : List α) : List α :=
  hs.take s ++ lastWindow (w - s) (hs.drop s)

def sinkStep {α : Type} (s w : Nat) (c : List α) (x : α) : List α :=
  if c.length < s then c ++ [x] else c.take s ++ step (w - s) (c.drop s) x

def sinkRun {α : Type} (s w : Nat) (hs : List α) : List α :=
  hs.foldl (sinkStep s w) []

theorem sinkStep_of_lt {α : Type} (s w : Nat) (c : List α) (x : α) (h : c.length < s) :
    sinkStep s w c x = c ++ [x] := by
  unfold sinkStep
  exact ite_pos' h _ _

theorem sinkStep_of_ge {α : Type} (s w : Nat) (c : List α) (x : α) (h : ¬ c.length < s) :
    sinkStep s w c x = c.take s ++ step (w - s) (c.drop s) x := by
  unfold sinkStep
  exact ite_neg' h _ _

theorem sinkStep_correct {α : Type} (s w : Nat) (hs : List α) (x : α) :
    sinkStep s w (sinkWindow s w hs) x = sinkWindow s w (hs ++ [x]) := by
  have hlenx : (hs ++ [x]).length = hs.length + 1 := length_append_singleton hs x
  by_cases hn : hs.length < s
  · -- the sinks are not full yet: everything is kept
    have h1 : sinkWindow s w hs = hs := by
      calc sinkWindow s w hs = hs.take s ++ lastWindow (w - s) (hs.drop s) := rfl
        _ = hs ++ lastWindow (w - s) [] := by
            rw [take_all hs s (by omega), drop_all hs s (by omega)]
        _ = hs ++ [] := by rw [lastWindow_nil]
        _ = hs := append_nil' hs
    have h2 : sinkWindow s w (hs ++ [x]) = hs ++ [x] := by
      calc sinkWindow s w (hs ++ [x])
          = (hs ++ [x]).take s ++ lastWindow (w - s) ((hs ++ [x]).drop s) := rfl
        _ = (hs ++ [x]) ++ lastWindow (w - s) [] := by
            rw [take_all (hs ++ [x]) s (by omega), drop_all (hs ++ [x]) s (by omega)]
        _ = (hs ++ [x]) ++ [] := by rw [lastWindow_nil]
        _ = hs ++ [x] := append_nil' (hs ++ [x])
    calc sinkStep s w (sinkWindow s w hs) x = sinkStep s w hs x := by rw [h1]
      _ = hs ++ [x] := sinkStep_of_lt s w hs x hn
      _ = sinkWindow s w (hs ++ [x]) := h2.symm
  · -- the sinks are full: the rest slides with `step (w - s)`
    have hle : s ≤ hs.length := by omega
    have hts : (hs.take s).length = s := length_take_of_le hs s hle
    have es : s - (hs.take s).length = 0 := by omega
    have hA : (sinkWindow s w hs).take s = hs.take s := by
      calc (sinkWindow s w hs).take s
          = (hs.take s ++ lastWindow (w - s) (hs.drop s)).take s := rfl
        _ = (hs.take s).take s ++
              (lastWindow (w - s) (hs.drop s)).take (s - (hs.take s).length) :=
            take_append_eq _ _ s
        _ = (hs.take s).take s ++ (lastWindow (w - s) (hs.drop s)).take 0 := by rw [es]
        _ = (hs.take s).take s ++ [] := rfl
        _ = (hs.take s).take s := append_nil' _
        _ = hs.take s := take_all (hs.take s) s (by omega)
    have hB : (sinkWindow s w hs).drop s = lastWindow (w - s) (hs.drop s) := by
      calc (sinkWindow s w hs).drop s
          = (hs.take s ++ lastWindow (w - s) (hs.drop s)).drop s := rfl
        _ = (hs.take s).drop s ++
              (lastWindow (w - s) (hs.drop s)).drop (s - (hs.take s).length) :=
            drop_append_eq _ _ s
        _ = (hs.take s).drop s ++ (lastWindow (w - s) (hs.drop s)).drop 0 := by rw [es]
        _ = [] ++ (lastWindow (w - s) (hs.drop s)).drop 0 := by
            rw [drop_all (hs.take s) s (by omega)]
        _ = lastWindow (w - s) (hs.drop s) := rfl
    have hlen : ¬ (sinkWindow s w hs).length < s := by
      have h1 := length_append' (hs.take s) (lastWindow (w - s) (hs.drop s))
      have h2 : (sinkWindow s w hs).length =
          (hs.take s ++ lastWindow (w - s) (hs.drop s)).length := rfl
      omega
    have e : s - hs.length = 0 := by omega
    have hC : (hs ++ [x]).take s = hs.take s := by
      calc (hs ++ [x]).take s = hs.take s ++ [x].take (s - hs.length) := take_append_eq hs [x] s
        _ = hs.take s ++ [x].take 0 := by rw [e]
        _ = hs.take s ++ [] := rfl
        _ = hs.take s := append_nil' _
    have hD : (hs ++ [x]).drop s = hs.drop s ++ [x] := by
      calc (hs ++ [x]).drop s = hs.drop s ++ [x].drop (s - hs.length) := drop_append_eq hs [x] s
        _ = hs.drop s ++ [x].drop 0 := by rw [e]
        _ = hs.drop s ++ [x] := rfl
    calc sinkStep s w (sinkWindow s w hs) x
        = (sinkWindow s w hs).take s ++ step (w - s) ((sinkWindow s w hs).drop s) x :=
          sinkStep_of_ge s w _ x hlen
      _ = hs.take s ++ step (w - s) (lastWindow (w - s) (hs.drop s)) x := by rw [hA, hB]
      _ = hs.take s ++ lastWindow (w - s) (hs.drop s ++ [x]) := by
          rw [step_lastWindow (w - s) (hs.drop s) x]
      _ = (hs ++ [x]).take s ++ lastWindow (w - s) ((hs ++ [x]).drop s) := by rw [hC, hD]
      _ = sinkWindow s w (hs ++ [x]) := rfl

theorem sinkWindow_nil {α : Type} (s w : Nat) : sinkWindow s w ([] : List α) = [] := by
  calc sinkWindow s w ([] : List α)
      = ([] : List α).take s ++ lastWindow (w - s) (([] : List α).drop s) := rfl
    _ = [] ++ lastWindow (w - s) ([] : List α) := by rw [take_nil', drop_nil']
    _ = [] ++ ([] : List α) := by rw [lastWindow_nil]
    _ = [] := rfl

theorem sinkRun_aux {α : Type} (s w : Nat) :
    ∀ (hs ys : List α), ys.foldl (sinkStep s w) (sinkWindow s w hs) = sinkWindow s w (hs ++ ys)
  | hs, [] => by
    calc ([] : List α).foldl (sinkStep s w) (sinkWindow s w hs) = sinkWindow s w hs := rfl
      _ = sinkWindow s w (hs ++ []) := by rw [append_nil' hs]
  | hs, y :: ys => by
    calc (y :: ys).foldl (sinkStep s w) (sinkWindow s w hs)
        = ys.foldl (sinkStep s w) (sinkStep s w (sinkWindow s w hs) y) := rfl
      _ = ys.foldl (sinkStep s w) (sinkWindow s w (hs ++ [y])) := by
          rw [sinkStep_correct s w hs y]
      _ = sinkWindow s w ((hs ++ [y]) ++ ys) := sinkRun_aux s w (hs ++ [y]) ys
      _ = sinkWindow s w (hs ++ (y :: ys)) := by rw [append_singleton_cons hs y ys]

theorem sinkRun_correct {α : Type} (s w : Nat) (hs : List α) :
    sinkRun s w hs = sinkWindow s w hs := by
  calc sinkRun s w hs = hs.foldl (sinkStep s w) [] := rfl
    _ = hs.foldl (sinkStep s w) (sinkWindow s w ([] : List α)) := by rw [sinkWindow_nil s w]
    _ = sinkWindow s w ([] ++ hs) := sinkRun_aux s w [] hs
    _ = sinkWindow s w hs := rfl

end KVWindow
