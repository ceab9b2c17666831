/-!
# KVWindow.Lemmas.Arith: `if`, `%`, `/` and `*` facts

The only file that names core library lemmas about `if`, `%`, `/` and `*`. Each such
lemma tries the core name first and falls back to a second route (`split`, `simp`,
another core name, or `omega`), so one lemma renamed in a later Lean release does not
break the build. Everything else in the project reasons about these operations through
this file and `omega`; where each core name was confirmed is listed in `lean/README.md`.

Namespace `KVArith`, outside the public `KVWindow` namespace.
-/

namespace KVArith

/-! ## if-then-else -/

/-- The `then` branch of a decided `if`. -/
theorem ite_pos' {α : Type} {c : Prop} [Decidable c] (h : c) (t e : α) :
    (if c then t else e) = t := by
  first
  | exact if_pos h
  | (split <;> first | rfl | contradiction)

/-- The `else` branch of a decided `if`. -/
theorem ite_neg' {α : Type} {c : Prop} [Decidable c] (h : ¬ c) (t e : α) :
    (if c then t else e) = e := by
  first
  | exact if_neg h
  | (split <;> first | rfl | contradiction)

/-! ## `%` and `/` (core names, each with a fallback) -/

theorem mod_lt' (x : Nat) {w : Nat} (hw : 0 < w) : x % w < w := by
  first
  | exact Nat.mod_lt x hw
  | exact Nat.mod_lt _ hw

theorem mod_self_lt (x w : Nat) (h : x < w) : x % w = x := by
  first
  | exact Nat.mod_eq_of_lt h
  | (simp only [Nat.mod_eq_of_lt h])

/-- `0 % w = 0` for every `w` (`w = 0` by evaluation, `w > 0` by `mod_self_lt`), so no
proof needs `0 % w` to reduce by `rfl`. -/
theorem zero_mod' (w : Nat) : 0 % w = 0 := by
  cases w with
  | zero => first | rfl | decide
  | succ m => exact mod_self_lt 0 (m + 1) (by omega)

theorem add_mod_self (x w : Nat) : (x + w) % w = x % w := by
  first
  | exact Nat.add_mod_right x w
  | (simp only [Nat.add_mod_right])
  | simp

theorem div_add_mod' (x k : Nat) : k * (x / k) + x % k = x := by
  first
  | exact Nat.div_add_mod x k
  | (have h := Nat.mod_add_div x k; omega)

/-! ## `*` (own proofs: `Nat.mul` recurses on its second argument) -/

/-- `n * (m + 1) = n * m + n`: one unfolding of `Nat.mul` (core's `Nat.mul_succ` is the
same `rfl`; it is the fallback). -/
theorem mul_succ' (n m : Nat) : n * (m + 1) = n * m + n := by
  first
  | rfl
  | exact Nat.mul_succ ..
  | exact Nat.mul_add_one ..

theorem succ_mul' (j m : Nat) : (j + 1) * m = j * m + m := by
  induction m with
  | zero =>
    have e1 : (j + 1) * 0 = 0 := by first | rfl | exact Nat.mul_zero ..
    have e2 : j * 0 = 0 := by first | rfl | exact Nat.mul_zero ..
    omega
  | succ m ih =>
    have e1 := mul_succ' (j + 1) m
    have e2 := mul_succ' j m
    omega

theorem zero_mul' (m : Nat) : 0 * m = 0 := by
  induction m with
  | zero => first | rfl | exact Nat.mul_zero ..
  | succ m ih =>
    have e := mul_succ' 0 m
    omega

/-- `(x + w * q) % w = x % w`: `q` applications of `add_mod_self`; the route of
`mod_add_mod'` that names no core `%` lemma. -/
theorem add_mul_mod_self' (x w q : Nat) : (x + w * q) % w = x % w := by
  induction q with
  | zero =>
    show (x + w * 0) % w = x % w
    have e : w * 0 = 0 := by first | rfl | exact Nat.mul_zero ..
    have e2 : x + w * 0 = x := by omega
    rw [e2]
  | succ q ih =>
    show (x + w * (q + 1)) % w = x % w
    have e := mul_succ' w q
    have e2 : x + w * (q + 1) = (x + w * q) + w := by omega
    rw [e2, add_mod_self]
    exact ih

/-- Every `%` proof of the project goes through this one: core's `Nat.mod_add_mod` first,
then a proof from `div_add_mod'` and `add_mul_mod_self'` alone. -/
theorem mod_add_mod' (a w d : Nat) : (a % w + d) % w = (a + d) % w := by
  first
  | exact Nat.mod_add_mod a w d
  | (have h1 := div_add_mod' a w
     have h2 := add_mul_mod_self' (a % w + d) w (a / w)
     have h3 : a % w + d + w * (a / w) = a + d := by omega
     rw [h3] at h2
     exact h2.symm)
  | (simp only [Nat.mod_add_mod])
  | simp

/-! ## Windows of fewer than `w` consecutive numbers (own proofs from the four above) -/

/-- `(o + d) % w` when `o % w + d` does not wrap. -/
theorem mod_add_of_lt (o d w : Nat) (h : o % w + d < w) : (o + d) % w = o % w + d := by
  have h1 := mod_add_mod' o w d
  have h2 := mod_self_lt (o % w + d) w h
  omega

/-- `(o + d) % w` when `o % w + d` wraps once (`d < w`). -/
theorem mod_add_of_ge (o d w : Nat) (hw : 0 < w) (hd : d < w) (h : w ≤ o % w + d) :
    (o + d) % w = o % w + d - w := by
  have h0 := mod_lt' o hw
  have h1 := mod_add_mod' o w d
  have e : o % w + d = (o % w + d - w) + w := by omega
  have h3 : (o % w + d) % w = (o % w + d - w + w) % w := congrArg (fun x => x % w) e
  have h4 := add_mod_self (o % w + d - w) w
  have h5 := mod_self_lt (o % w + d - w) w (by omega)
  omega

/-- Numbers closer than `w` apart have different residues: two positions of one window
never share a slot. -/
theorem mod_ne_of_lt (p q w : Nat) (hw : 0 < w) (h1 : p < q) (h2 : q < p + w) :
    p % w ≠ q % w := by
  have hq : q = p + (q - p) := by omega
  have hd : q - p < w := by omega
  have h0 := mod_lt' p hw
  have e2 : q % w = (p + (q - p)) % w := congrArg (fun x => x % w) hq
  intro heq
  by_cases hc : p % w + (q - p) < w
  · have e := mod_add_of_lt p (q - p) w hc
    omega
  · have e := mod_add_of_ge p (q - p) w hw hd (by omega)
    omega

/-- The offset of `o + d` within its window, read back from the two residues (the
arithmetic of `rkv_slot_pos`). -/
theorem window_offset (o d w : Nat) (hw : 0 < w) (hd : d < w) :
    ((o + d) % w + w - o % w) % w = d := by
  have h0 := mod_lt' o hw
  by_cases hc : o % w + d < w
  · have e := mod_add_of_lt o d w hc
    have e2 : (o + d) % w + w - o % w = d + w := by omega
    have e3 : ((o + d) % w + w - o % w) % w = (d + w) % w := congrArg (fun x => x % w) e2
    have e4 := add_mod_self d w
    have e5 := mod_self_lt d w hd
    omega
  · have e := mod_add_of_ge o d w hw hd (by omega)
    have e2 : (o + d) % w + w - o % w = d := by omega
    have e3 : ((o + d) % w + w - o % w) % w = d % w := congrArg (fun x => x % w) e2
    have e5 := mod_self_lt d w hd
    omega

/-- Going back from a residue `s` to the number of the window that starts at `o`. -/
theorem slot_offset_back (o s w : Nat) (hw : 0 < w) (hs : s < w) :
    (o + (s + w - o % w) % w) % w = s := by
  have hc := mod_lt' o hw
  by_cases h : o % w ≤ s
  · have e1 : s + w - o % w = (s - o % w) + w := by omega
    have d1 : (s + w - o % w) % w = s - o % w := by
      calc (s + w - o % w) % w = (s - o % w + w) % w := congrArg (fun x => x % w) e1
        _ = (s - o % w) % w := add_mod_self (s - o % w) w
        _ = s - o % w := mod_self_lt (s - o % w) w (by omega)
    have d2 := mod_add_of_lt o (s - o % w) w (by omega)
    calc (o + (s + w - o % w) % w) % w = (o + (s - o % w)) % w := by rw [d1]
      _ = o % w + (s - o % w) := d2
      _ = s := by omega
  · have d1 : (s + w - o % w) % w = s + w - o % w := mod_self_lt _ w (by omega)
    have d2 := mod_add_of_ge o (s + w - o % w) w hw (by omega) (by omega)
    calc (o + (s + w - o % w) % w) % w = (o + (s + w - o % w)) % w := by rw [d1]
      _ = o % w + (s + w - o % w) - w := d2
      _ = s := by omega

/-! ## Blocks of `B` positions (own proofs from `div_add_mod'` and `mod_lt'`; used by the paged pool) -/

/-- `B * (q / B) ≤ q < B * (q / B) + B`: the block `q / B` covers position `q`. -/
theorem div_mul_bounds' (q B : Nat) (hB : 0 < B) : B * (q / B) ≤ q ∧ q < B * (q / B) + B := by
  have h1 := div_add_mod' q B
  have h2 := mod_lt' q hB
  exact ⟨by omega, by omega⟩

/-- Two different positions of one block sit in different slots. -/
theorem mod_ne_of_div_eq' (q n B : Nat) (hd : q / B = n / B) (hne : ¬ q = n) :
    ¬ q % B = n % B := by
  intro hm
  have h1 := div_add_mod' q B
  have h2 := div_add_mod' n B
  have h3 : B * (q / B) = B * (n / B) := congrArg (fun v => B * v) hd
  omega

end KVArith
