#!/usr/bin/env python3
"""Writes the benchmark's record values: COUNT JSON-like lines of exactly SIZE bytes each.

    payloads.py OUT_FILE [--count 2000] [--size 1024] [--seed 7]

ProducerPerformance picks one line at random per record (--payload-file). The lines look like
application events (field names repeat, values vary), so lz4 compresses a batch of them about
2-3x, between the extremes of random bytes (no gain) and one repeated letter (huge gain).
"""
import argparse
import json
import random

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu order payment "
    "refund invoice customer account shipment warehouse pending settled cancelled express"
).split()


def line(rng: random.Random, size: int) -> str:
    event = {
        "id": rng.getrandbits(64),
        "ts": 1_700_000_000_000 + rng.randrange(10**9),
        "type": rng.choice(WORDS),
        "customer": {"id": rng.randrange(10**6), "name": " ".join(rng.choices(WORDS, k=2)),
                     "tier": rng.choice(["gold", "silver", "bronze"])},
        "amount": round(rng.uniform(0, 10_000), 2),
        "currency": rng.choice(["EUR", "USD", "GBP", "JPY"]),
        "items": [{"sku": f"SKU-{rng.randrange(10**5):05d}", "qty": rng.randrange(1, 9),
                   "price": round(rng.uniform(1, 500), 2)} for _ in range(rng.randrange(3, 7))],
        "note": " ".join(rng.choices(WORDS, k=rng.randrange(5, 15))),
    }
    text = json.dumps(event, separators=(",", ":"))
    pad = size - len(text) - len(',"pad":""}') + 1
    while pad < 0:  # too long: drop items until it fits
        event["items"].pop()
        text = json.dumps(event, separators=(",", ":"))
        pad = size - len(text) - len(',"pad":""}') + 1
    filler = ""
    while len(filler) < pad:  # free text: words repeat, their order does not
        filler += rng.choice(WORDS) + (" " if rng.random() < 0.8 else f" {rng.randrange(10**4)} ")
    filler = filler[:pad]
    out = text[:-1] + ',"pad":"' + filler + '"}'
    assert len(out.encode()) == size, (len(out), size)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with open(args.out, "w", encoding="ascii") as f:
        for _ in range(args.count):
            f.write(line(rng, args.size) + "\n")


if __name__ == "__main__":
    main()
