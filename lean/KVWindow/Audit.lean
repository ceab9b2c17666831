import KVWindow.Window
import KVWindow.Positions
import KVWindow.Ring
import KVWindow.Attention
import KVWindow.Sinks

/-!
# KVWindow.Audit: which axioms each main theorem rests on

`lake build` prints one line per theorem. Only the standard axioms `propext`,
`Quot.sound` and `Classical.choice` may appear (`kvwindow prove` checks this).
-/

#print axioms KVWindow.lastWindow_length
#print axioms KVWindow.lastWindow_suffix
#print axioms KVWindow.step_lastWindow
#print axioms KVWindow.step_preserves_valid
#print axioms KVWindow.run_correct
#print axioms KVWindow.run_length_le
#print axioms KVWindow.pushChunk_correct
#print axioms KVWindow.run_length_lt_of_gt
#print axioms KVWindow.positions_lastWindow
#print axioms KVWindow.step_preserves_positionInvariant
#print axioms KVWindow.push_simulates_step
#print axioms KVWindow.push_preserves_wf
#print axioms KVWindow.ring_run_correct
#print axioms KVWindow.slot_eq_pos_mod
#print axioms KVWindow.filter_inWindow_eq_lastWindow
#print axioms KVWindow.attention_eq
#print axioms KVWindow.sinkStep_correct
#print axioms KVWindow.sinkRun_correct
