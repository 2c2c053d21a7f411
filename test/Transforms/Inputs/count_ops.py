#!/usr/bin/env python3
"""Prints how often each operation name occurs in the MLIR text on stdin, one
`name count` line per op, sorted by name (e.g. for FileCheck)."""
import collections
import re
import sys

counts = collections.Counter(
    re.findall(r'(?:^|\s|= )((?:onnx|fsdp)\.[A-Za-z_]+)(?=[ "(])', sys.stdin.read(), re.M))
for name in sorted(counts):
    print(name, counts[name])
