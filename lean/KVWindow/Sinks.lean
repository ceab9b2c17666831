import KVWindow.Window

/-!
# KVWindow.Sinks: attention sinks (StreamingLLM)

`sinkWindow s w hs` keeps the first `s` entries forever (the sinks) plus the
last `w - s` of the rest. `sinkStep` fills the sinks first, then slides the rest
with the plain `step (w - s)`. `sinkStep_correct` is the core equation;
`sinkRun_correct` lifts it to streams.
-/

namespace KVWindow

def sinkWindow {α : Type} (s w : Nat) (hs : List α) : List α :=
  hs.take s ++ lastWindow (w - s) (hs.drop s)

def sinkStep {α : Type} (s w : Nat) (c : List α) (x : α) : List α :=
  if c.length < s then c ++ [x] else c.take s ++ step (w - s) (c.drop s) x

def sinkRun {α : Type} (s w : Nat) (hs : List α) : List α :=
  hs.foldl (sinkStep s w) []

theorem sinkStep_correct {α : Type} (s w : Nat) (hs : List α) (x : α) :
    sinkStep s w (sinkWindow s w hs) x = sinkWindow s w (hs ++ [x]) := by
  have hlenx : (hs ++ [x]).length = hs.length + 1 := length_append_singleton hs x
  by_cases hn : hs.length < s
  · have h1 : sinkWindow s w hs = hs := by
      unfold sinkWindow
      rw [take_all hs s (by omega), drop_all hs s (by omega), lastWindow_nil, append_nil']
    have h2 : sinkWindow s w (hs ++ [x]) = hs ++ [x] := by
      unfold sinkWindow
      rw [take_all (hs ++ [x]) s (by omega), drop_all (hs ++ [x]) s (by omega), lastWindow_nil,
        append_nil']
    rw [h1, h2]
    unfold sinkStep
    rw [if_pos hn]
  · have hle : s ≤ hs.length := by omega
    have hts : (hs.take s).length = s := length_take_of_le hs s hle
    have hA : (sinkWindow s w hs).take s = hs.take s := by
      unfold sinkWindow
      rw [take_append_eq, hts, Nat.sub_self, take_zero', append_nil',
        take_all (hs.take s) s (by omega)]
    have hB : (sinkWindow s w hs).drop s = lastWindow (w - s) (hs.drop s) := by
      unfold sinkWindow
      rw [drop_append_eq, hts, Nat.sub_self, drop_zero', drop_all (hs.take s) s (by omega),
        nil_append']
    have hlen : ¬ (sinkWindow s w hs).length < s := by
      unfold sinkWindow
      rw [length_append', hts]
      omega
    have e : s - hs.length = 0 := by omega
    have hC : (hs ++ [x]).take s = hs.take s := by
      rw [take_append_eq, e, take_zero', append_nil']
    have hD : (hs ++ [x]).drop s = hs.drop s ++ [x] := by
      rw [drop_append_eq, e, drop_zero']
    unfold sinkStep
    rw [if_neg hlen, hA, hB, step_lastWindow]
    unfold sinkWindow
    rw [hC, hD]

theorem sinkWindow_nil {α : Type} (s w : Nat) : sinkWindow s w ([] : List α) = [] := by
  unfold sinkWindow
  rw [take_nil', drop_nil', lastWindow_nil, nil_append']

theorem sinkRun_aux {α : Type} (s w : Nat) :
    ∀ (hs ys : List α), ys.foldl (sinkStep s w) (sinkWindow s w hs) = sinkWindow s w (hs ++ ys)
  | hs, [] => by
    show sinkWindow s w hs = sinkWindow s w (hs ++ [])
    rw [append_nil']
  | hs, y :: ys => by
    show ys.foldl (sinkStep s w) (sinkStep s w (sinkWindow s w hs) y) =
      sinkWindow s w (hs ++ y :: ys)
    rw [sinkStep_correct, sinkRun_aux s w (hs ++ [y]) ys, append_singleton_cons]

theorem sinkRun_correct {α : Type} (s w : Nat) (hs : List α) :
    sinkRun s w hs = sinkWindow s w hs := by
  have h := sinkRun_aux s w [] hs
  rw [sinkWindow_nil, nil_append'] at h
  exact h

end KVWindow
