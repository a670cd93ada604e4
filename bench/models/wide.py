# wide.py — the wider, shallower decoder at a longer sequence: d_model 384, 2 layers, 6 heads, sequence 3072,
# vocabulary 4096, batch 1 (gpt.py's model with other defaults).  Threading: single-threaded.
"""Wide, shallow GPT-style decoder at sequence 3072 (bench/record-traces.sh records one step)."""

import gpt

if __name__ == "__main__":
    gpt.main(dict(d_model=384, layers=2, heads=6, seq=3072, vocab=4096))
