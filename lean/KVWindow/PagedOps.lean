import KVWindow.PagedAppend

/-!
# KVWindow.PagedOps: new sequences, `free`, every op, every run

* a new live sequence (`add`, `fork`, a prefix hit) adds its table's entries to the counts
  (`refcount_new`);
* `free` releases the entries of the table one by one (`dropHead`, `dropAll`: each a release of
  one reference) and then drops the sequence from the live list (`unlive`);
* `holds_apply`: every successful op keeps `PoolHolds` with the histories `Op.hist` gives, and
  keeps every other live sequence live; `holds_runOps`: so does every run.
-/

namespace KVWindow

open KVList KVArith

/-! ## A new live sequence -/

/-- A new live sequence with table `l`: every count grows by `l`'s. -/
theorem refcount_new {α : Type} (P P' : Pool α) (s : Nat) (l : List (Option Nat))
    (hs : ¬ InL s P.live) (hlive : P'.live = s :: P.live) (htab : P'.table = upd P.table s l)
    (d : Nat) : refcount P' d = countIn d l + refcount P d := by
  have e1 : refcount P' d = refsIn P'.table d P'.live := rfl
  have e2 : refsIn P'.table d P'.live = refsIn (upd P.table s l) d (s :: P.live) := by
    rw [htab, hlive]
  have e3 : refsIn (upd P.table s l) d (s :: P.live) =
      countIn d (upd P.table s l s) + refsIn (upd P.table s l) d P.live := rfl
  have e4 : countIn d (upd P.table s l s) = countIn d l := congrArg (countIn d) (upd_same P.table s l)
  have e5 := refsIn_upd_out P.table d s l P.live hs
  have e6 : refcount P d = refsIn P.table d P.live := rfl
  omega

/-- A new live sequence whose table references blocks in range keeps references in range. -/
theorem refsOK_new {α : Type} (N : Nat) (P P' : Pool α) (s : Nat) (l : List (Option Nat))
    (h : RefsOK N P) (hl : ∀ j b, getSlot l j = some b → b < N)
    (hlive : P'.live = s :: P.live) (htab : P'.table = upd P.table s l) : RefsOK N P' := by
  unfold RefsOK
  intro t ht j b hb
  have ht1 : InL t (s :: P.live) := by
    rw [← hlive]
    exact ht
  have hb1 : getSlot (upd P.table s l t) j = some b := by
    rw [← htab]
    exact hb
  by_cases hts : t = s
  · have e : upd P.table s l t = l := (congrArg (upd P.table s l) hts).trans (upd_same P.table s l)
    exact hl j b ((congrArg (fun x => getSlot x j) e).symm.trans hb1)
  · have e : upd P.table s l t = P.table t := upd_ne P.table s l t hts
    have ht2 : InL t P.live :=
      ((inL_cons t s P.live).1 ht1).elim (fun e' => absurd e'.symm hts) (fun h' => h')
    exact refsOK_at N P h t j b ht2 ((congrArg (fun x => getSlot x j) e).symm.trans hb1)

/-- A live sequence other than the new one keeps its history. -/
theorem content_new_other {α : Type} (W B : Nat) (P P' : Pool α) (H : Nat → List α) (s t : Nat)
    (v : List α) (n : Nat) (l : List (Option Nat)) (hts : ¬ t = s)
    (hlen : P'.len = upd P.len s n) (htab : P'.table = upd P.table s l) (hmem : P'.mem = P.mem)
    (hc : Content W B P H t) : Content W B P' (upd H s v) t := by
  have hl : P'.len t = P.len t := by
    rw [hlen]
    exact upd_ne P.len s n t hts
  have ht : P'.table t = P.table t := by
    rw [htab]
    exact upd_ne P.table s l t hts
  exact content_same W B P P' H (upd H s v) t hl (upd_ne H s v t hts) ht hmem hc

/-- Membership in a list with a new head. -/
theorem inL_new (s t : Nat) (l l' : List Nat) (hl : l' = s :: l) (ht : InL t l') (hts : ¬ t = s) :
    InL t l := by
  rw [hl] at ht
  exact ((inL_cons t s l).1 ht).elim (fun e => absurd e.symm hts) (fun h => h)

theorem inL_new_old (s t : Nat) (l l' : List Nat) (hl : l' = s :: l) (ht : InL t l) : InL t l' := by
  rw [hl]
  exact (inL_cons t s l).2 (Or.inr ht)

/-! ## `add` and `fork` -/

theorem holds_addSeq {α : Type} (W B N : Nat) (P P' : Pool α) (H : Nat → List α) (s : Nat)
    (h : PoolHolds W B N P H) (hr : addSeq P s = some P') :
    PoolHolds W B N P' (upd H s []) ∧ (∀ t, InL t P.live → InL t P'.live) := by
  by_cases hc : memN s P.live = true
  · have e : addSeq P s = none := by
      unfold addSeq
      exact ite_pos' hc _ _
    rw [e] at hr
    exact absurd hr (none_ne_some' P')
  · have e : addSeq P s = some { P with
        live := s :: P.live, table := upd P.table s [],
        len := upd P.len s 0, ident := upd P.ident s 0 } := by
      unfold addSeq
      exact ite_neg' hc _ _
    rw [e] at hr
    have e2 := Option.some.inj hr
    have hs : ¬ InL s P.live := memN_false s P.live hc
    have hlive : P'.live = s :: P.live := (congrArg Pool.live e2).symm
    have htab : P'.table = upd P.table s [] := (congrArg Pool.table e2).symm
    have hlen : P'.len = upd P.len s 0 := (congrArg Pool.len e2).symm
    have hmem : P'.mem = P.mem := (congrArg Pool.mem e2).symm
    have hfree : P'.free = P.free := (congrArg Pool.free e2).symm
    have hwf := poolHolds_wf W B N P H h
    have hcont := poolHolds_content W B N P H h
    obtain ⟨hnd, hfnd, hfr, hrefs⟩ := poolWF_parts N P hwf
    have h1 : NoDupL P'.live := by
      rw [hlive]
      exact (noDupL_cons s P.live).2 ⟨hs, hnd⟩
    have h2 : NoDupL P'.free := by
      rw [hfree]
      exact hfnd
    have h3 : ∀ d, InL d P'.free ↔ (d < N ∧ refcount P' d = 0) := by
      intro d
      have e3 := refcount_new P P' s [] hs hlive htab d
      have e4 : countIn d ([] : List (Option Nat)) = 0 := rfl
      rw [hfree]
      constructor
      · intro hin
        have h6 := (hfr d).1 hin
        have h7 := h6.2
        exact ⟨h6.1, by omega⟩
      · intro h5
        have h7 := h5.2
        exact (hfr d).2 ⟨h5.1, by omega⟩
    have h4 : RefsOK N P' :=
      refsOK_new N P P' s [] hrefs (fun j b hb => absurd ((getSlot_nil j).symm.trans hb)
        (none_ne_some' b)) hlive htab
    refine ⟨poolHolds_intro W B N P' (upd H s []) (poolWF_intro N P' h1 h2 h3 h4) (fun t ht => ?_),
      fun t ht => inL_new_old s t P.live P'.live hlive ht⟩
    by_cases hts : t = s
    · rw [hts]
      unfold Content
      have el : P'.len s = 0 := by
        rw [hlen]
        exact upd_same P.len s 0
      have eh : (upd H s [] s).length = 0 := (congrArg List.length (upd_same H s [])).trans rfl
      refine ⟨by omega, ?_⟩
      intro q hq _
      exact False.elim (by omega)
    · exact content_new_other W B P P' H s t [] 0 [] hts hlen htab hmem
        (hcont t (inL_new s t P.live P'.live hlive ht hts))

theorem holds_forkSeq {α : Type} (W B N : Nat) (P P' : Pool α) (H : Nat → List α)
    (src dst : Nat) (h : PoolHolds W B N P H) (hr : forkSeq P src dst = some P') :
    PoolHolds W B N P' (upd H dst (H src)) ∧ (∀ t, InL t P.live → InL t P'.live) := by
  by_cases hc : memN src P.live = true ∧ ¬ memN dst P.live = true
  · have e : forkSeq P src dst = some { P with
        live := dst :: P.live,
        table := upd P.table dst (P.table src), len := upd P.len dst (P.len src),
        ident := upd P.ident dst (P.ident src) } := by
      unfold forkSeq
      exact ite_pos' hc _ _
    rw [e] at hr
    have e2 := Option.some.inj hr
    have hsrc : InL src P.live := (memN_iff src P.live).1 hc.1
    have hdst : ¬ InL dst P.live := memN_false dst P.live hc.2
    have hlive : P'.live = dst :: P.live := (congrArg Pool.live e2).symm
    have htab : P'.table = upd P.table dst (P.table src) := (congrArg Pool.table e2).symm
    have hlen : P'.len = upd P.len dst (P.len src) := (congrArg Pool.len e2).symm
    have hmem : P'.mem = P.mem := (congrArg Pool.mem e2).symm
    have hfree : P'.free = P.free := (congrArg Pool.free e2).symm
    have hwf := poolHolds_wf W B N P H h
    have hcont := poolHolds_content W B N P H h
    obtain ⟨hnd, hfnd, hfr, hrefs⟩ := poolWF_parts N P hwf
    have h1 : NoDupL P'.live := by
      rw [hlive]
      exact (noDupL_cons dst P.live).2 ⟨hdst, hnd⟩
    have h2 : NoDupL P'.free := by
      rw [hfree]
      exact hfnd
    have h3 : ∀ d, InL d P'.free ↔ (d < N ∧ refcount P' d = 0) := by
      intro d
      have e3 := refcount_new P P' dst (P.table src) hdst hlive htab d
      have e4 := refsIn_ge P.table d src P.live hsrc
      have e5 : refcount P d = refsIn P.table d P.live := rfl
      rw [hfree]
      constructor
      · intro hin
        have h6 := (hfr d).1 hin
        have h7 := h6.2
        exact ⟨h6.1, by omega⟩
      · intro h5
        have h7 := h5.2
        exact (hfr d).2 ⟨h5.1, by omega⟩
    have h4 : RefsOK N P' :=
      refsOK_new N P P' dst (P.table src) hrefs (fun j b hb => refsOK_at N P hrefs src j b hsrc hb)
        hlive htab
    refine ⟨poolHolds_intro W B N P' (upd H dst (H src)) (poolWF_intro N P' h1 h2 h3 h4)
      (fun t ht => ?_), fun t ht => inL_new_old dst t P.live P'.live hlive ht⟩
    by_cases htd : t = dst
    · rw [htd]
      have hl : P'.len dst = P.len src := by
        rw [hlen]
        exact upd_same P.len dst (P.len src)
      have ht : P'.table dst = P.table src := by
        rw [htab]
        exact upd_same P.table dst (P.table src)
      exact content_frame W B P P' H (upd H dst (H src)) src dst hl (upd_same H dst (H src))
        (fun q _ _ => congrArg (fun l => getSlot l (q / B)) ht)
        (fun q b _ _ _ => congrArg (fun m => m b (q % B)) hmem) (hcont src hsrc)
    · exact content_new_other W B P P' H dst t (H src) (P.len src) (P.table src) htd hlen htab hmem
        (hcont t (inL_new dst t P.live P'.live hlive ht htd))
  · have e : forkSeq P src dst = none := by
      unfold forkSeq
      exact ite_neg' hc _ _
    rw [e] at hr
    exact absurd hr (none_ne_some' P')

/-! ## `free` -/

/-- Releasing the first entry of `s`'s table keeps the invariant and only touches `s`'s table
(and the free list). -/
theorem dropHead_facts {α : Type} (N : Nat) (P : Pool α) (s : Nat) (o : Option Nat)
    (rest : List (Option Nat)) (hwf : PoolWF N P) (hs : InL s P.live)
    (ht : P.table s = o :: rest) :
    PoolWF N (dropHead P s o rest) ∧ (dropHead P s o rest).live = P.live ∧
      (dropHead P s o rest).len = P.len ∧ (dropHead P s o rest).mem = P.mem ∧
      (dropHead P s o rest).table = upd P.table s rest := by
  obtain ⟨hnd, _, _, hrefs⟩ := poolWF_parts N P hwf
  have hl : ∀ k c, getSlot rest k = some c → ∃ k', getSlot (P.table s) k' = some c := by
    intro k c hk
    refine ⟨k + 1, ?_⟩
    rw [ht]
    exact hk
  cases o with
  | none =>
    have hcount : ∀ d, refcount (dropRef P s rest) d = refcount P d := by
      intro d
      have e1 := dropRef_count P s rest hnd hs d
      have e2 : countIn d (P.table s) = ind d none + countIn d rest :=
        (congrArg (countIn d) ht).trans rfl
      have e3 : ind d none = 0 := rfl
      omega
    exact ⟨poolWF_same_counts N P (dropRef P s rest) hwf rfl rfl
      (refsOK_dropRef N P s rest hrefs hl) hcount, rfl, rfl, rfl, rfl⟩
  | some b =>
    have hb : b < N := by
      have h0 : getSlot (P.table s) 0 = some b := (congrArg (fun l => getSlot l 0) ht).trans rfl
      exact refsOK_at N P hrefs s 0 b hs h0
    have hcnt : ∀ d, countIn d rest + ind d (some b) = countIn d (P.table s) := by
      intro d
      have e2 : countIn d (P.table s) = ind d (some b) + countIn d rest :=
        (congrArg (countIn d) ht).trans rfl
      omega
    have hfl := pushIfUnref_fields (dropRef P s rest) b
    exact ⟨wf_dropRef_release N P s b rest hwf hs hb hl hcnt, hfl.1, hfl.2.2.1, hfl.2.2.2, hfl.2.1⟩

/-- Releasing every entry of `s`'s table: the invariant holds, `s`'s table is empty, and every
other live sequence keeps its history. -/
theorem dropAll_facts {α : Type} (W B N : Nat) (H : Nat → List α) (s : Nat) :
    ∀ (l : List (Option Nat)) (P : Pool α), PoolWF N P → InL s P.live → P.table s = l →
      (∀ t, InL t P.live → ¬ t = s → Content W B P H t) →
      PoolWF N (dropAll P s l) ∧ (dropAll P s l).live = P.live ∧ (dropAll P s l).table s = [] ∧
        ∀ t, InL t P.live → ¬ t = s → Content W B (dropAll P s l) H t
  | [], _, hwf, _, ht, hc => ⟨hwf, rfl, ht, hc⟩
  | o :: rest, P, hwf, hs, ht, hc => by
    obtain ⟨hwf2, hlive2, hlen2, hmem2, htab2⟩ := dropHead_facts N P s o rest hwf hs ht
    have hs2 : InL s (dropHead P s o rest).live := by
      rw [hlive2]
      exact hs
    have ht2 : (dropHead P s o rest).table s = rest := by
      rw [htab2]
      exact upd_same P.table s rest
    have hc2 : ∀ t, InL t (dropHead P s o rest).live → ¬ t = s →
        Content W B (dropHead P s o rest) H t := by
      intro t ht' hts
      have ht'' : InL t P.live := by
        rw [← hlive2]
        exact ht'
      have htt : (dropHead P s o rest).table t = P.table t := by
        rw [htab2]
        exact upd_ne P.table s rest t hts
      exact content_same W B P (dropHead P s o rest) H H t (congrArg (fun f => f t) hlen2) rfl
        htt hmem2 (hc t ht'' hts)
    obtain ⟨i1, i2, i3, i4⟩ := dropAll_facts W B N H s rest (dropHead P s o rest) hwf2 hs2 ht2 hc2
    have i4' : ∀ t, InL t P.live → ¬ t = s → Content W B (dropAll P s (o :: rest)) H t := by
      intro t ht' hts
      have ht'' : InL t (dropHead P s o rest).live := by
        rw [hlive2]
        exact ht'
      exact i4 t ht'' hts
    exact ⟨i1, i2.trans hlive2, i3, i4'⟩

/-- The filter `unlive` applies keeps exactly the other sequences. -/
theorem unlive_keep (s t : Nat) : (fun u => decide (¬ u = s)) t = true ↔ ¬ t = s := by
  constructor
  · intro h
    have h' : decide (¬ t = s) = true := h
    exact of_decide_eq_true h'
  · intro h
    have h' : decide (¬ t = s) = true := decide_eq_true h
    exact h'

theorem holds_freeSeq {α : Type} (W B N : Nat) (P P' : Pool α) (H : Nat → List α) (s : Nat)
    (h : PoolHolds W B N P H) (hr : freeSeq P s = some P') :
    PoolHolds W B N P' (upd H s []) ∧ (∀ t, InL t P.live → ¬ t = s → InL t P'.live) := by
  by_cases hc : memN s P.live = true
  · have e : freeSeq P s = some (unlive (dropAll P s (P.table s)) s) := by
      unfold freeSeq
      exact ite_pos' hc _ _
    rw [e] at hr
    have e2 : unlive (dropAll P s (P.table s)) s = P' := Option.some.inj hr
    rw [← e2]
    have hs : InL s P.live := (memN_iff s P.live).1 hc
    have hwf := poolHolds_wf W B N P H h
    have hcont := poolHolds_content W B N P H h
    obtain ⟨d1, d2, d3, d4⟩ :=
      dropAll_facts W B N H s (P.table s) P hwf hs rfl (fun t ht _ => hcont t ht)
    obtain ⟨hnd, hfnd, hfr, hrefs⟩ := poolWF_parts N (dropAll P s (P.table s)) d1
    -- membership in the filtered live list
    have hmemb : ∀ t, InL t (unlive (dropAll P s (P.table s)) s).live ↔
        (InL t P.live ∧ ¬ t = s) := by
      intro t
      have e3 := inL_filter (fun u => decide (¬ u = s)) t (dropAll P s (P.table s)).live
      have e4 := unlive_keep s t
      constructor
      · intro ht
        have h5 := e3.1 ht
        have h6 : InL t P.live := by
          rw [← d2]
          exact h5.1
        exact ⟨h6, e4.1 h5.2⟩
      · intro ht
        have h6 : InL t (dropAll P s (P.table s)).live := by
          rw [d2]
          exact ht.1
        exact e3.2 ⟨h6, e4.2 ht.2⟩
    have hcount : ∀ d, refcount (unlive (dropAll P s (P.table s)) s) d =
        refcount (dropAll P s (P.table s)) d := by
      intro d
      have e5 := refsIn_filter (dropAll P s (P.table s)).table d (fun u => decide (¬ u = s))
        (dropAll P s (P.table s)).live (fun t _ hf => by
          have hts : t = s := by
            by_cases h6 : t = s
            · exact h6
            · have h8 : decide (¬ t = s) = false := hf
              have h9 : decide (¬ t = s) = true := decide_eq_true h6
              exact absurd (h8.symm.trans h9) (by decide)
          calc countIn d ((dropAll P s (P.table s)).table t)
              = countIn d ((dropAll P s (P.table s)).table s) :=
                congrArg (fun v => countIn d ((dropAll P s (P.table s)).table v)) hts
            _ = countIn d [] := congrArg (countIn d) d3
            _ = 0 := rfl)
      exact e5
    have h1 : NoDupL (unlive (dropAll P s (P.table s)) s).live :=
      noDupL_filter (fun u => decide (¬ u = s)) (dropAll P s (P.table s)).live hnd
    have h3 : ∀ d, InL d (unlive (dropAll P s (P.table s)) s).free ↔
        (d < N ∧ refcount (unlive (dropAll P s (P.table s)) s) d = 0) := by
      intro d
      rw [hcount d]
      exact hfr d
    have h4 : RefsOK N (unlive (dropAll P s (P.table s)) s) := by
      unfold RefsOK
      intro t ht j b hb
      have ht1 : InL t (dropAll P s (P.table s)).live := by
        rw [d2]
        exact ((hmemb t).1 ht).1
      exact refsOK_at N (dropAll P s (P.table s)) hrefs t j b ht1 hb
    refine ⟨poolHolds_intro W B N (unlive (dropAll P s (P.table s)) s) (upd H s [])
      (poolWF_intro N (unlive (dropAll P s (P.table s)) s) h1 hfnd h3 h4)
      (fun t ht => ?_), fun t ht hts => (hmemb t).2 ⟨ht, hts⟩⟩
    obtain ⟨ht1, hts⟩ := (hmemb t).1 ht
    exact content_same W B (dropAll P s (P.table s)) (unlive (dropAll P s (P.table s)) s) H
      (upd H s []) t rfl (upd_ne H s [] t hts) rfl rfl (d4 t ht1 hts)
  · have e : freeSeq P s = none := by
      unfold freeSeq
      exact ite_neg' hc _ _
    rw [e] at hr
    exact absurd hr (none_ne_some' P')

/-! ## Every op, every run -/

/-- Every successful op keeps every history (as `Op.hist` says) and every live sequence but its
target live. -/
theorem holds_apply {α : Type} (W B N : Nat) (hB : 0 < B) (P P' : Pool α) (H : Nat → List α)
    (o : Op α) (h : PoolHolds W B N P H) (hr : Op.apply W B P o = some P') :
    PoolHolds W B N P' (Op.hist H o) ∧
      (∀ t, InL t P.live → ¬ t = Op.target o → InL t P'.live) := by
  cases o with
  | add s =>
    have hr' : addSeq P s = some P' := hr
    obtain ⟨h1, h2⟩ := holds_addSeq W B N P P' H s h hr'
    exact ⟨h1, fun t ht _ => h2 t ht⟩
  | append s pos x =>
    have hr' : appendTok W B P s pos x = some P' := hr
    obtain ⟨h1, h2⟩ := holds_appendTok W B N hB P P' H s pos x h hr'
    refine ⟨h1, fun t ht _ => ?_⟩
    rw [h2]
    exact ht
  | chunk s pos xs =>
    have hr' : appendChunk W B s P pos xs = some P' := hr
    obtain ⟨h1, h2⟩ := holds_appendChunk W B N hB P P' H s pos xs h hr'
    refine ⟨h1, fun t ht _ => ?_⟩
    rw [h2]
    exact ht
  | fork src dst =>
    have hr' : forkSeq P src dst = some P' := hr
    obtain ⟨h1, h2⟩ := holds_forkSeq W B N P P' H src dst h hr'
    exact ⟨h1, fun t ht _ => h2 t ht⟩
  | free s =>
    have hr' : freeSeq P s = some P' := hr
    exact holds_freeSeq W B N P P' H s h hr'

/-- An op changes the history of its target only. -/
theorem hist_other {α : Type} (H : Nat → List α) (o : Op α) (t : Nat) (h : ¬ t = Op.target o) :
    Op.hist H o t = H t := by
  cases o with
  | add s => exact upd_ne H s [] t h
  | append s _ x => exact upd_ne H s (H s ++ [x]) t h
  | chunk s _ xs => exact upd_ne H s (H s ++ xs) t h
  | fork src dst => exact upd_ne H dst (H src) t h
  | free s => exact upd_ne H s [] t h

theorem runOps_nil {α : Type} (W B : Nat) (P : Pool α) (H : Nat → List α) :
    runOps W B P H [] = (P, H) := rfl

theorem runOps_none {α : Type} (W B : Nat) (P : Pool α) (H : Nat → List α) (o : Op α)
    (os : List (Op α)) (hr : Op.apply W B P o = none) :
    runOps W B P H (o :: os) = runOps W B P H os := by
  calc runOps W B P H (o :: os)
      = runOps W B (afterOp P H o (Op.apply W B P o)).1 (afterOp P H o (Op.apply W B P o)).2 os := rfl
    _ = runOps W B (afterOp P H o none).1 (afterOp P H o none).2 os := by rw [hr]
    _ = runOps W B P H os := rfl

theorem runOps_some {α : Type} (W B : Nat) (P P' : Pool α) (H : Nat → List α) (o : Op α)
    (os : List (Op α)) (hr : Op.apply W B P o = some P') :
    runOps W B P H (o :: os) = runOps W B P' (Op.hist H o) os := by
  calc runOps W B P H (o :: os)
      = runOps W B (afterOp P H o (Op.apply W B P o)).1 (afterOp P H o (Op.apply W B P o)).2 os := rfl
    _ = runOps W B (afterOp P H o (some P')).1 (afterOp P H o (some P')).2 os := by rw [hr]
    _ = runOps W B P' (Op.hist H o) os := rfl

/-- Every run keeps the simulation relation, from any pool that satisfies it. -/
theorem holds_runOps {α : Type} (W B N : Nat) (hB : 0 < B) :
    ∀ (os : List (Op α)) (P : Pool α) (H : Nat → List α), PoolHolds W B N P H →
      PoolHolds W B N (runOps W B P H os).1 (runOps W B P H os).2
  | [], _, _, h => h
  | o :: os, P, H, h => by
    cases hr : Op.apply W B P o with
    | none =>
      rw [runOps_none W B P H o os hr]
      exact holds_runOps W B N hB os P H h
    | some P' =>
      rw [runOps_some W B P P' H o os hr]
      exact holds_runOps W B N hB os P' (Op.hist H o) (holds_apply W B N hB P P' H o h hr).1

end KVWindow
