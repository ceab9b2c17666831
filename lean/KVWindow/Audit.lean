import KVWindow.Window
import KVWindow.Positions
import KVWindow.Ring
import KVWindow.Attention
import KVWindow.Sinks
import KVWindow.IndexRing
import KVWindow.Paged

/-!
# KVWindow.Audit: which axioms each main theorem rests on

`lake build` prints one line per theorem. Only the standard axioms `propext`,
`Quot.sound` and `Classical.choice` may appear (`kvwindow prove` and the
`lean` GitHub workflow check this).
-/

#print axioms KVWindow.lastWindow_length
#print axioms KVWindow.lastWindow_suffix
#print axioms KVWindow.step_lastWindow
#print axioms KVWindow.step_preserves_valid
#print axioms KVWindow.run_correct
#print axioms KVWindow.run_length_le
#print axioms KVWindow.pushChunk_correct
#print axioms KVWindow.run_length_lt_of_gt
#print axioms KVWindow.hf_convention_eq
#print axioms KVWindow.positions_lastWindow
#print axioms KVWindow.step_preserves_positionInvariant
#print axioms KVWindow.push_simulates_step
#print axioms KVWindow.push_preserves_wf
#print axioms KVWindow.ring_run_correct
#print axioms KVWindow.slot_eq_pos_mod
#print axioms KVWindow.slot_eq_pos_mod_entry
#print axioms KVWindow.filter_inWindow_eq_lastWindow
#print axioms KVWindow.attention_eq
#print axioms KVWindow.chunk_attention_eq
#print axioms KVWindow.sinkStep_correct
#print axioms KVWindow.sinkRun_correct
#print axioms KVWindow.rkv_slot_lt
#print axioms KVWindow.rkv_len_eq_min
#print axioms KVWindow.rkv_oldest_add_len
#print axioms KVWindow.rkv_logical_slot_lt
#print axioms KVWindow.rkv_slot_pos_logical_slot
#print axioms KVWindow.rkv_slot_pos_inverse
#print axioms KVWindow.rkv_slot_pos_slot
#print axioms KVWindow.rkv_slot_valid_iff
#print axioms KVWindow.rkv_chunk_kept_eq
#print axioms KVWindow.rkv_chunk_src_range
#print axioms KVWindow.rkv_chunk_dst_inj
#print axioms KVWindow.rkv_in_window_iff
#print axioms KVWindow.rkv_split_range_partition
#print axioms KVWindow.rkv_cache_row_next
#print axioms KVWindow.index_read_lastWindow
#print axioms KVWindow.index_push_simulates_step
#print axioms KVWindow.index_pushChunk_simulates
#print axioms KVWindow.index_run_correct
#print axioms KVWindow.index_slot_eq_pos_mod
#print axioms KVWindow.index_slot_pos_correct
#print axioms KVWindow.paged_read_window
#print axioms KVWindow.paged_free_safe
#print axioms KVWindow.paged_independent
#print axioms KVWindow.paged_refcount
#print axioms KVWindow.paged_hit_valid
