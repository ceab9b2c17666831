import KVWindow.PagedPlace

/-!
# KVWindow.PagedAppend: the freeing rule, one append, one chunk

* the rule only releases blocks no position the next query needs lies in (`eligible_spares`),
  so each release keeps every history (`holds_releaseAt`), and so does the whole rule
  (`rule_holds`);
* an append is a placement, a `bump` and the rule (`holds_appendTok`); a chunk is appends in
  order (`holds_chunkFrom`, `holds_appendChunk`).
-/

namespace KVWindow

open KVList KVArith

/-! ## The rule -/

/-- An eligible logical block holds no position the query at `n` needs. -/
theorem eligible_spares (W B n j q : Nat) (hB : 0 < B) (he : B * j + B + W ≤ n + 1)
    (h2 : n < q + W) : ¬ q / B = j := by
  intro hq
  have h := div_mul_bounds' q B hB
  have e : B * (q / B) = B * j := congrArg (fun v => B * v) hq
  omega

/-- Releasing a logical block that holds no needed position of `s` keeps every history. -/
theorem holds_releaseAt {α : Type} (W B N : Nat) (P : Pool α) (H : Nat → List α) (s j : Nat)
    (hs : InL s P.live) (hj : ∀ q, q < P.len s → P.len s < q + W → ¬ q / B = j)
    (h : PoolHolds W B N P H) :
    PoolHolds W B N (releaseAt P s j) H ∧ (releaseAt P s j).live = P.live := by
  have hwf := poolHolds_wf W B N P H h
  have hcont := poolHolds_content W B N P H h
  cases hg : getSlot (P.table s) j with
  | none =>
    have e : releaseAt P s j = P := congrArg (releaseWith P s j) hg
    rw [e]
    exact ⟨h, rfl⟩
  | some b =>
    have e : releaseAt P s j = pushIfUnref (dropRef P s (setExt (P.table s) j none)) b :=
      congrArg (releaseWith P s j) hg
    rw [e]
    obtain ⟨_, _, _, hrefs⟩ := poolWF_parts N P hwf
    have hb : b < N := refsOK_at N P hrefs s j b hs hg
    have hl : ∀ k c, getSlot (setExt (P.table s) j none) k = some c →
        ∃ k', getSlot (P.table s) k' = some c := by
      intro k c hk
      by_cases hkj : k = j
      · have e2 : getSlot (setExt (P.table s) j none) k = none :=
          (congrArg (getSlot (setExt (P.table s) j none)) hkj).trans
            (getSlot_setExt_same (P.table s) j none)
        exact absurd (e2.symm.trans hk) (none_ne_some' c)
      · exact ⟨k, (getSlot_setExt_ne (P.table s) j k none hkj).symm.trans hk⟩
    have hcnt : ∀ d, countIn d (setExt (P.table s) j none) + ind d (some b) =
        countIn d (P.table s) := by
      intro d
      have e1 := countIn_setExt d (P.table s) j none
      have e2 : ind d (getSlot (P.table s) j) = ind d (some b) := congrArg (ind d) hg
      have e3 : ind d none = 0 := rfl
      omega
    have hwf2 := wf_dropRef_release N P s b (setExt (P.table s) j none) hwf hs hb hl hcnt
    have hfl := pushIfUnref_fields (dropRef P s (setExt (P.table s) j none)) b
    refine ⟨poolHolds_intro W B N _ H hwf2 (fun t ht => ?_), hfl.1⟩
    have ht' : InL t P.live := by
      have ht1 := ht
      rw [hfl.1] at ht1
      exact ht1
    have e1 : (pushIfUnref (dropRef P s (setExt (P.table s) j none)) b).table t =
        upd P.table s (setExt (P.table s) j none) t := congrArg (fun f => f t) hfl.2.1
    refine content_frame W B P (pushIfUnref (dropRef P s (setExt (P.table s) j none)) b) H H t t
      (congrArg (fun f => f t) hfl.2.2.1) rfl ?_
      (fun q b' _ _ _ => congrArg (fun m => m b' (q % B)) hfl.2.2.2) (hcont t ht')
    intro q h1 h2
    by_cases hts : t = s
    · have h1s : q < P.len s := by rw [← hts]; exact h1
      have h2s : P.len s < q + W := by rw [← hts]; exact h2
      have e2 : upd P.table s (setExt (P.table s) j none) t = setExt (P.table s) j none :=
        (congrArg (upd P.table s (setExt (P.table s) j none)) hts).trans (upd_same _ _ _)
      calc getSlot ((pushIfUnref (dropRef P s (setExt (P.table s) j none)) b).table t) (q / B)
          = getSlot (upd P.table s (setExt (P.table s) j none) t) (q / B) :=
            congrArg (fun l => getSlot l (q / B)) e1
        _ = getSlot (setExt (P.table s) j none) (q / B) := congrArg (fun l => getSlot l (q / B)) e2
        _ = getSlot (P.table s) (q / B) :=
            getSlot_setExt_ne (P.table s) j (q / B) none (hj q h1s h2s)
        _ = getSlot (P.table t) (q / B) := congrArg (fun v => getSlot (P.table v) (q / B)) hts.symm
    · calc getSlot ((pushIfUnref (dropRef P s (setExt (P.table s) j none)) b).table t) (q / B)
          = getSlot (upd P.table s (setExt (P.table s) j none) t) (q / B) :=
            congrArg (fun l => getSlot l (q / B)) e1
        _ = getSlot (P.table t) (q / B) :=
            congrArg (fun l => getSlot l (q / B)) (upd_ne P.table s _ t hts)

/-- One step of the rule keeps every history. -/
theorem holds_ruleStep {α : Type} (W B N : Nat) (hB : 0 < B) (P : Pool α) (H : Nat → List α)
    (s j : Nat) (h : PoolHolds W B N P H) (hs : InL s P.live) :
    PoolHolds W B N (ruleStep W B s P j) H ∧ (ruleStep W B s P j).live = P.live := by
  by_cases he : B * j + B + W ≤ P.len s + 1
  · have e : ruleStep W B s P j = releaseAt P s j := by
      unfold ruleStep
      exact ite_pos' he _ _
    rw [e]
    exact holds_releaseAt W B N P H s j hs
      (fun q _ h2 => eligible_spares W B (P.len s) j q hB he h2) h
  · have e : ruleStep W B s P j = P := by
      unfold ruleStep
      exact ite_neg' he _ _
    rw [e]
    exact ⟨h, rfl⟩

theorem foldl_ruleStep {α : Type} (W B N : Nat) (hB : 0 < B) (H : Nat → List α) (s : Nat) :
    ∀ (l : List Nat) (P : Pool α), PoolHolds W B N P H → InL s P.live →
      PoolHolds W B N (l.foldl (ruleStep W B s) P) H ∧ (l.foldl (ruleStep W B s) P).live = P.live
  | [], _, h, _ => ⟨h, rfl⟩
  | j :: l, P, h, hs => by
    have hstep := holds_ruleStep W B N hB P H s j h hs
    have hs' : InL s (ruleStep W B s P j).live := by
      rw [hstep.2]
      exact hs
    have ih := foldl_ruleStep W B N hB H s l (ruleStep W B s P j) hstep.1 hs'
    exact ⟨ih.1, ih.2.trans hstep.2⟩

/-- The whole freeing rule keeps every history. -/
theorem rule_holds {α : Type} (W B N : Nat) (hB : 0 < B) (P : Pool α) (H : Nat → List α) (s : Nat)
    (h : PoolHolds W B N P H) (hs : InL s P.live) :
    PoolHolds W B N (rule W B s P) H ∧ (rule W B s P).live = P.live :=
  foldl_ruleStep W B N hB H s (natsFrom 0 (P.table s).length) P h hs

/-! ## One append -/

/-- A successful append keeps every history, the appending sequence's extended by the entry. -/
theorem holds_appendTok {α : Type} (W B N : Nat) (hB : 0 < B) (P P' : Pool α) (H : Nat → List α)
    (s pos : Nat) (x : α) (h : PoolHolds W B N P H) (hr : appendTok W B P s pos x = some P') :
    PoolHolds W B N P' (upd H s (H s ++ [x])) ∧ P'.live = P.live := by
  by_cases hc : memN s P.live = true ∧ pos = P.len s
  · have e : appendTok W B P s pos x =
        afterPlace W B s (placeWith P s (pos / B) (pos % B) x (getSlot (P.table s) (pos / B))) := by
      unfold appendTok
      exact ite_pos' hc _ _
    have hs : InL s P.live := (memN_iff s P.live).1 hc.1
    have hpos : pos = P.len s := hc.2
    rw [e, hpos] at hr
    cases hp : placeWith P s (P.len s / B) (P.len s % B) x (getSlot (P.table s) (P.len s / B)) with
    | none =>
      rw [hp] at hr
      exact absurd hr (none_ne_some' P')
    | some P1 =>
      rw [hp] at hr
      have hr' : some (rule W B s (bump P1 s)) = some P' := hr
      have e2 : rule W B s (bump P1 s) = P' := Option.some.inj hr'
      obtain ⟨hb, hlive⟩ := holds_placeWith W B N P P1 H s x h hs hp
      have hs1 : InL s (bump P1 s).live := by
        have h0 : InL s P1.live := by
          rw [hlive]
          exact hs
        exact h0
      obtain ⟨hrule, hlive2⟩ := rule_holds W B N hB (bump P1 s) (upd H s (H s ++ [x])) s hb hs1
      rw [← e2]
      exact ⟨hrule, hlive2.trans hlive⟩
  · have e : appendTok W B P s pos x = none := by
      unfold appendTok
      exact ite_neg' hc _ _
    rw [e] at hr
    exact absurd hr (none_ne_some' P')

/-! ## One chunk -/

theorem holds_chunkFrom {α : Type} (W B N : Nat) (hB : 0 < B) (s : Nat) :
    ∀ (xs : List α) (P P' : Pool α) (H : Nat → List α) (pos : Nat), PoolHolds W B N P H →
      chunkFrom W B s P pos xs = some P' →
      PoolHolds W B N P' (upd H s (H s ++ xs)) ∧ P'.live = P.live
  | [], P, P', H, _, h, hr => by
    have hr' : some P = some P' := hr
    have e : P = P' := Option.some.inj hr'
    rw [← e]
    refine ⟨poolHolds_congr W B N P H (upd H s (H s ++ [])) h (fun t => ?_), rfl⟩
    by_cases hts : t = s
    · rw [hts, upd_same H s (H s ++ []), append_nil' (H s)]
    · exact upd_ne H s (H s ++ []) t hts
  | x :: xs, P, P', H, pos, h, hr => by
    have hr' : bindO (appendTok W B P s pos x) (fun P1 => chunkFrom W B s P1 (pos + 1) xs) =
        some P' := hr
    cases ha : appendTok W B P s pos x with
    | none =>
      rw [ha] at hr'
      exact absurd hr' (none_ne_some' P')
    | some P1 =>
      rw [ha] at hr'
      have hr'' : chunkFrom W B s P1 (pos + 1) xs = some P' := hr'
      obtain ⟨h1, hlive1⟩ := holds_appendTok W B N hB P P1 H s pos x h ha
      obtain ⟨h2, hlive2⟩ :=
        holds_chunkFrom W B N hB s xs P1 P' (upd H s (H s ++ [x])) (pos + 1) h1 hr''
      refine ⟨poolHolds_congr W B N P'
        (upd (upd H s (H s ++ [x])) s (upd H s (H s ++ [x]) s ++ xs)) (upd H s (H s ++ (x :: xs)))
        h2 (fun t => ?_), hlive2.trans hlive1⟩
      by_cases hts : t = s
      · rw [hts, upd_same H s (H s ++ (x :: xs)), upd_same (upd H s (H s ++ [x])) s _,
          upd_same H s (H s ++ [x])]
        exact (append_singleton_cons (H s) x xs).symm
      · rw [upd_ne H s (H s ++ (x :: xs)) t hts, upd_ne (upd H s (H s ++ [x])) s _ t hts,
          upd_ne H s (H s ++ [x]) t hts]

/-- A successful chunk keeps every history, the sequence's extended by the chunk. -/
theorem holds_appendChunk {α : Type} (W B N : Nat) (hB : 0 < B) (P P' : Pool α)
    (H : Nat → List α) (s pos : Nat) (xs : List α) (h : PoolHolds W B N P H)
    (hr : appendChunk W B s P pos xs = some P') :
    PoolHolds W B N P' (upd H s (H s ++ xs)) ∧ P'.live = P.live := by
  by_cases hc : memN s P.live = true ∧ pos = P.len s
  · have e : appendChunk W B s P pos xs = chunkFrom W B s P pos xs := by
      unfold appendChunk
      exact ite_pos' hc _ _
    rw [e] at hr
    exact holds_chunkFrom W B N hB s xs P P' H pos h hr
  · have e : appendChunk W B s P pos xs = none := by
      unfold appendChunk
      exact ite_neg' hc _ _
    rw [e] at hr
    exact absurd hr (none_ne_some' P')

end KVWindow
