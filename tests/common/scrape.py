"""Reads strait's HTTP listener as a monitoring system would: the Prometheus project's own
Python client parses `/metrics` (OpenMetrics text, as strait announces it), and probes print
their status and body. Prints one JSON document.

    python3 scrape.py metrics URL   -> {"status": 200, "samples": [[name, {labels}, value], ...]}
    python3 scrape.py probe URL     -> {"status": 200 or 503, "body": {...}}
"""

import json
import math
import sys
import urllib.error
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


mode, url = sys.argv[1:3]
status, content_type, text = get(url)
if mode == "metrics":
    if not content_type.startswith("application/openmetrics-text"):
        sys.exit(f"unexpected Content-Type {content_type!r}")
    samples = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            value = None if math.isnan(s.value) else s.value
            samples.append([s.name, s.labels, value])
    print(json.dumps({"status": status, "samples": samples}))
else:
    print(json.dumps({"status": status, "body": json.loads(text)}))
