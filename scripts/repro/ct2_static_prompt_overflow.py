# The standalone repro of docs/findings/ct2-static-prompt-heap-overflow.md (tests/test_engine_ct2.py runs it in a
# child): generate_batch with a static_prompt longer than the sliding window writes past a heap block in
# cpu::softmax (valgrind: "Invalid write of size 8 ... 0 bytes after a block", MKL_DISABLE_FAST_MM=1).
#   MALLOC_CHECK_=3 PYTHONPATH=. .venv/bin/python scripts/repro/ct2_static_prompt_overflow.py [W STATIC PROMPT [REPEATS]]
# Exit 0 and "survived" when nothing was detected; glibc aborts (SIGABRT) or the process segfaults otherwise.
import sys

import ctranslate2

from impl.engines import ct2, tiny   # a tiny seeded Mistral (sliding_window = W) converted by TransformersConverter

W, static, prompt, reps = (int(a) for a in (sys.argv[1:5] + ["4", "10", "5", "6"][len(sys.argv) - 1:]))
t = tiny.build("mistral", W)
g = ctranslate2.Generator(str(ct2.converted(t)), device="cpu", compute_type="float32", intra_threads=1)
toks = [f"<t{4 + (7 * i) % 60}>" for i in range(static + prompt)]
print("ctranslate2", ctranslate2.__version__, "W", W, "static_prompt", static, "prompt", prompt, flush=True)
for _ in range(reps):
    g.generate_batch([toks[static:]], static_prompt=toks[:static], max_length=1, min_length=1, sampling_topk=1,
                     end_token=[], include_prompt_in_result=False)
print("survived", flush=True)
