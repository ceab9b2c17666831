import KVWindow.PagedOps

/-!
# KVWindow.Paged: the paged pool theorems (DESIGN §1 "Paged caches", §3)

From any pool that holds its histories (`PoolHolds`: well formed, and every needed position of
every live sequence is in a block of its table holding that position's entry):

* `paged_read_window`: after any op sequence, what a sequence reads through its table is
  `lastWindow (W-1)` of its own history, and no slot it reads is missing;
* `paged_free_safe`: the freeing rule's condition never holds for a block holding a position a
  query at the current length or later attends to, and after any op sequence no block holding a
  needed position is on the free list (so it can be neither taken nor overwritten);
* `paged_independent`: a successful op on one sequence never changes what another reads;
* `paged_refcount`: a block is on the free list iff it is one of the `N` blocks and no live table
  references it, refcount 0 means the same, a referenced block has refcount ≥ 1, and no block is
  on the free list twice (refcounts are counted, so they count references by definition);
* `paged_hit_valid`: admitting a sequence from a prefix hit of length `L` keeps the invariant iff
  the blocks covering positions `max(0, L-W+1) .. L-1` are present and hold the prompt there.

The Python twins are in `tests/test_paged_twins.py`; the oracle is `pyspec/paged.py`.
-/

namespace KVWindow

open KVList KVArith

/-! ## Reading -/

/-- A sequence that holds its history reads its window, slot by slot. -/
theorem readSlots_content {α : Type} (W B : Nat) (P : Pool α) (H : Nat → List α) (t : Nat)
    (hc : Content W B P H t) : readSlots W B P t = (lastWindow (W - 1) (H t)).map some := by
  unfold Content at hc
  obtain ⟨hlen, hq⟩ := hc
  have hl1 := lastWindow_length (W - 1) (H t)
  have hl2 := length_map' (some : α → Option α) (lastWindow (W - 1) (H t))
  have hlen3 : ((lastWindow (W - 1) (H t)).map some).length = min (W - 1) (P.len t) := by omega
  have hpt : ∀ i, i < ((lastWindow (W - 1) (H t)).map some).length →
      nthOpt ((lastWindow (W - 1) (H t)).map some) i =
        some (lookup P B t (P.len t - (W - 1) + i)) := by
    intro i hi
    have hp1 : P.len t - (W - 1) + i < P.len t := by omega
    have hp2 : P.len t < P.len t - (W - 1) + i + W := by omega
    obtain ⟨b, hb, hm⟩ := hq (P.len t - (W - 1) + i) hp1 hp2
    have hlt : P.len t - (W - 1) + i < (H t).length := by omega
    obtain ⟨e, he⟩ := nthOpt_lt_some (H t) (P.len t - (W - 1) + i) hlt
    have e1 : nthOpt ((lastWindow (W - 1) (H t)).map some) i =
        (nthOpt (lastWindow (W - 1) (H t)) i).map some :=
      nthOpt_map' (some : α → Option α) (lastWindow (W - 1) (H t)) i
    have e2 : nthOpt (lastWindow (W - 1) (H t)) i = nthOpt (H t) ((H t).length - (W - 1) + i) :=
      nthOpt_drop (H t) ((H t).length - (W - 1)) i
    have e3 : (H t).length - (W - 1) + i = P.len t - (W - 1) + i := by omega
    have e4 : lookup P B t (P.len t - (W - 1) + i) = P.mem b ((P.len t - (W - 1) + i) % B) :=
      congrArg (lookupIn P.mem ((P.len t - (W - 1) + i) % B)) hb
    calc nthOpt ((lastWindow (W - 1) (H t)).map some) i
        = (nthOpt (lastWindow (W - 1) (H t)) i).map some := e1
      _ = (nthOpt (H t) ((H t).length - (W - 1) + i)).map some := by rw [e2]
      _ = (nthOpt (H t) (P.len t - (W - 1) + i)).map some := by rw [e3]
      _ = (some e).map some := by rw [he]
      _ = some (some e) := rfl
      _ = some (P.mem b ((P.len t - (W - 1) + i) % B)) := by rw [hm, he]
      _ = some (lookup P B t (P.len t - (W - 1) + i)) := by rw [e4]
  calc readSlots W B P t
      = (natsFrom (P.len t - (W - 1)) (min (W - 1) (P.len t))).map (lookup P B t) := rfl
    _ = (natsFrom (P.len t - (W - 1)) ((lastWindow (W - 1) (H t)).map some).length).map
          (lookup P B t) := by rw [hlen3]
    _ = (lastWindow (W - 1) (H t)).map some :=
        map_natsFrom_of_nthOpt (lookup P B t) ((lastWindow (W - 1) (H t)).map some)
          (P.len t - (W - 1)) hpt

/-- A sequence that holds its history reads `lastWindow (W-1)` of it. -/
theorem readSeq_content {α : Type} (W B : Nat) (P : Pool α) (H : Nat → List α) (t : Nat)
    (hc : Content W B P H t) : readSeq W B P t = lastWindow (W - 1) (H t) := by
  calc readSeq W B P t = somes (readSlots W B P t) := rfl
    _ = somes ((lastWindow (W - 1) (H t)).map some) := by rw [readSlots_content W B P H t hc]
    _ = lastWindow (W - 1) (H t) := somes_map_some _

/-! ## The theorems -/

/-- After any op sequence, from any pool that holds its histories, every live sequence reads
`lastWindow (W-1)` of its own history through its table (every slot present), and the pool
still holds the histories. -/
theorem paged_read_window {α : Type} (W B N : Nat) (hB : 0 < B) (P : Pool α) (H : Nat → List α)
    (os : List (Op α)) (P' : Pool α) (H' : Nat → List α) (h : PoolHolds W B N P H)
    (hrun : runOps W B P H os = (P', H')) :
    PoolHolds W B N P' H' ∧ ∀ t, InL t P'.live →
      readSeq W B P' t = lastWindow (W - 1) (H' t) ∧
        readSlots W B P' t = (lastWindow (W - 1) (H' t)).map some := by
  have h1 := holds_runOps W B N hB os P H h
  rw [hrun] at h1
  have h2 : PoolHolds W B N P' H' := h1
  refine ⟨h2, fun t ht => ?_⟩
  have hc := poolHolds_content W B N P' H' h2 t ht
  exact ⟨readSeq_content W B P' H' t hc, readSlots_content W B P' H' t hc⟩

/-- The rule never frees a block holding a position a future query needs: a block eligible at
length `n` holds no position the query at any `t ≥ n` attends to; and after any op sequence
every position a live sequence's next query needs is in a block of its table that is not on the
free list and holds that position's entry. -/
theorem paged_free_safe {α : Type} (W B N : Nat) (hB : 0 < B) (P : Pool α) (H : Nat → List α)
    (os : List (Op α)) (P' : Pool α) (H' : Nat → List α) (h : PoolHolds W B N P H)
    (hrun : runOps W B P H os = (P', H')) :
    (∀ n j p t, Eligible W B n j → p / B = j → n ≤ t → ¬ inWindow W t p) ∧
      ∀ s, InL s P'.live → ∀ q, Needed W (P'.len s) q →
        ∃ b, getSlot (P'.table s) (q / B) = some b ∧ ¬ InL b P'.free ∧
          P'.mem b (q % B) = nthOpt (H' s) q := by
  refine ⟨fun n j p t he hp ht hin => ?_, fun s hs q hq => ?_⟩
  · unfold Eligible at he
    unfold inWindow at hin
    have hb := (div_mul_bounds' p B hB).2
    have e : B * (p / B) = B * j := congrArg (fun v => B * v) hp
    have h1 := hin.1
    have h2 := hin.2
    omega
  · obtain ⟨h2, _⟩ := paged_read_window W B N hB P H os P' H' h hrun
    have hc := poolHolds_content W B N P' H' h2 s hs
    unfold Content at hc
    unfold Needed at hq
    obtain ⟨b, hb, hm⟩ := hc.2 q hq.1 hq.2
    refine ⟨b, hb, fun hin => ?_, hm⟩
    obtain ⟨_, hun⟩ := free_unreferenced N P' (poolHolds_wf W B N P' H' h2) b hin
    exact hun s hs (q / B) hb

/-- A successful op on one sequence (its target; `dst` for a fork) leaves every other live
sequence live and reading exactly what it read before. -/
theorem paged_independent {α : Type} (W B N : Nat) (hB : 0 < B) (P P' : Pool α)
    (H : Nat → List α) (o : Op α) (h : PoolHolds W B N P H) (hr : Op.apply W B P o = some P')
    (t : Nat) (ht : InL t P.live) (hne : ¬ t = Op.target o) :
    InL t P'.live ∧ readSeq W B P' t = readSeq W B P t ∧ readSlots W B P' t = readSlots W B P t := by
  obtain ⟨h1, h2⟩ := holds_apply W B N hB P P' H o h hr
  have ht' := h2 t ht hne
  have hc' := poolHolds_content W B N P' (Op.hist H o) h1 t ht'
  have hc := poolHolds_content W B N P H h t ht
  have eh : Op.hist H o t = H t := hist_other H o t hne
  refine ⟨ht', ?_, ?_⟩
  · calc readSeq W B P' t = lastWindow (W - 1) (Op.hist H o t) :=
          readSeq_content W B P' (Op.hist H o) t hc'
      _ = lastWindow (W - 1) (H t) := by rw [eh]
      _ = readSeq W B P t := (readSeq_content W B P H t hc).symm
  · calc readSlots W B P' t = (lastWindow (W - 1) (Op.hist H o t)).map some :=
          readSlots_content W B P' (Op.hist H o) t hc'
      _ = (lastWindow (W - 1) (H t)).map some := by rw [eh]
      _ = readSlots W B P t := (readSlots_content W B P H t hc).symm

/-- After any op sequence: no block is on the free list twice; a block is on it iff it is one of
the `N` blocks and no live table references it; refcount 0 means no live table references the
block, and a referenced block has refcount ≥ 1 (`refcount` counts the references). -/
theorem paged_refcount {α : Type} (W B N : Nat) (hB : 0 < B) (P : Pool α) (H : Nat → List α)
    (os : List (Op α)) (P' : Pool α) (H' : Nat → List α) (h : PoolHolds W B N P H)
    (hrun : runOps W B P H os = (P', H')) :
    NoDupL P'.free ∧ ∀ b,
      (InL b P'.free ↔ (b < N ∧ ∀ t, InL t P'.live → ∀ j, ¬ getSlot (P'.table t) j = some b)) ∧
      (refcount P' b = 0 ↔ ∀ t, InL t P'.live → ∀ j, ¬ getSlot (P'.table t) j = some b) ∧
      (∀ t j, InL t P'.live → getSlot (P'.table t) j = some b → 1 ≤ refcount P' b) := by
  obtain ⟨h2, _⟩ := paged_read_window W B N hB P H os P' H' h hrun
  obtain ⟨_, hfnd, hfr, _⟩ := poolWF_parts N P' (poolHolds_wf W B N P' H' h2)
  refine ⟨hfnd, fun b => ⟨?_, refcount_zero P' b, fun t j ht hj => refcount_pos P' t j b ht hj⟩⟩
  constructor
  · intro hin
    have h3 := (hfr b).1 hin
    exact ⟨h3.1, (refcount_zero P' b).1 h3.2⟩
  · intro h3
    exact (hfr b).2 ⟨h3.1, (refcount_zero P' b).2 h3.2⟩

/-- Admitting `s` from a prefix hit — length `L ≤ prompt.length`, table `tbl` whose blocks are
among the `N` — keeps the invariant (with `s`'s history the prompt's first `L` entries) iff the
hit is valid: every position `max(0, L-W+1) .. L-1` lies in a block of `tbl` holding the prompt's
entry there. Blocks before the window may be anything (`none`, or evicted). -/
theorem paged_hit_valid {α : Type} (W B N : Nat) (P : Pool α) (H : Nat → List α)
    (s idt L : Nat) (tbl : List (Option Nat)) (prompt : List α) (h : PoolHolds W B N P H)
    (hs : ¬ InL s P.live) (hN : ∀ j b, getSlot tbl j = some b → b < N) (hL : L ≤ prompt.length) :
    PoolHolds W B N (admitHit P s idt L tbl) (upd H s (prompt.take L)) ↔
      HitValid W B P prompt L tbl := by
  have el : (admitHit P s idt L tbl).len s = L := upd_same P.len s L
  have et : (admitHit P s idt L tbl).table s = tbl := upd_same P.table s tbl
  have eh : upd H s (prompt.take L) s = prompt.take L := upd_same H s (prompt.take L)
  have hsA : InL s (admitHit P s idt L tbl).live := (inL_cons s s P.live).2 (Or.inl rfl)
  constructor
  · -- a usable hit is valid
    intro hA
    have hc := poolHolds_content W B N (admitHit P s idt L tbl) (upd H s (prompt.take L)) hA s hsA
    unfold Content at hc
    obtain ⟨_, hq⟩ := hc
    unfold HitValid
    intro q h1 h2
    have h1' : q < (admitHit P s idt L tbl).len s := by omega
    have h2' : (admitHit P s idt L tbl).len s < q + W := by omega
    obtain ⟨b, hb, hm⟩ := hq q h1' h2'
    refine ⟨b, (congrArg (fun l => getSlot l (q / B)) et).symm.trans hb, ?_⟩
    calc P.mem b (q % B) = nthOpt (upd H s (prompt.take L) s) q := hm
      _ = nthOpt (prompt.take L) q := congrArg (fun l => nthOpt l q) eh
      _ = nthOpt prompt q := nthOpt_take' prompt L q h1
  · -- a valid hit is usable
    intro hv
    unfold HitValid at hv
    have hwf := poolHolds_wf W B N P H h
    have hcont := poolHolds_content W B N P H h
    obtain ⟨hnd, hfnd, hfr, hrefs⟩ := poolWF_parts N P hwf
    have h1 : NoDupL (admitHit P s idt L tbl).live := (noDupL_cons s P.live).2 ⟨hs, hnd⟩
    have h2 : NoDupL (admitHit P s idt L tbl).free :=
      noDupL_filter (fun b => decide (countIn b tbl = 0)) P.free hfnd
    have h3 : ∀ d, InL d (admitHit P s idt L tbl).free ↔
        (d < N ∧ refcount (admitHit P s idt L tbl) d = 0) := by
      intro d
      have e1 := refcount_new P (admitHit P s idt L tbl) s tbl hs rfl rfl d
      have e2 := inL_filter (fun b => decide (countIn b tbl = 0)) d P.free
      constructor
      · intro hin
        have h5 := e2.1 hin
        have h6 : decide (countIn d tbl = 0) = true := h5.2
        have h7 : countIn d tbl = 0 := of_decide_eq_true h6
        have h8 := (hfr d).1 h5.1
        have h9 := h8.2
        exact ⟨h8.1, by omega⟩
      · intro h5
        have h9 := h5.2
        have h7 : countIn d tbl = 0 := by omega
        have h8 : InL d P.free := (hfr d).2 ⟨h5.1, by omega⟩
        exact e2.2 ⟨h8, decide_eq_true h7⟩
    have h4 : RefsOK N (admitHit P s idt L tbl) :=
      refsOK_new N P (admitHit P s idt L tbl) s tbl hrefs hN rfl rfl
    refine poolHolds_intro W B N (admitHit P s idt L tbl) (upd H s (prompt.take L))
      (poolWF_intro N (admitHit P s idt L tbl) h1 h2 h3 h4) (fun t ht => ?_)
    by_cases hts : t = s
    · rw [hts]
      unfold Content
      have hlen := length_take_of_le prompt L hL
      refine ⟨?_, ?_⟩
      · have e3 : (upd H s (prompt.take L) s).length = (prompt.take L).length :=
          congrArg List.length eh
        omega
      · intro q h1 h2
        have h1' : q < L := by omega
        have h2' : L < q + W := by omega
        obtain ⟨b, hb, hm⟩ := hv q h1' h2'
        refine ⟨b, (congrArg (fun l => getSlot l (q / B)) et).trans hb, ?_⟩
        calc P.mem b (q % B) = nthOpt prompt q := hm
          _ = nthOpt (prompt.take L) q := (nthOpt_take' prompt L q h1').symm
          _ = nthOpt (upd H s (prompt.take L) s) q := congrArg (fun l => nthOpt l q) eh.symm
    · exact content_new_other W B P (admitHit P s idt L tbl) H s t (prompt.take L) L tbl hts rfl rfl rfl
        (hcont t (inL_new s t P.live (admitHit P s idt L tbl).live rfl ht hts))

end KVWindow
