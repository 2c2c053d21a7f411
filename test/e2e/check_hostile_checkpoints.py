#!/usr/bin/env python3
"""Checkpoints that lie are refused; saves never delete what they did not write.

    check_hostile_checkpoints.py BUILD_DIR [--keep DIR]

With the corpus GPT-2 (one unit per block, FULL_SHARD, AdamW) compiled for
2 ranks, one step writes a sharded checkpoint and a full one; then copies
of them, each changed the way a mistake or an attacker would, are loaded
on 2 ranks and must be refused with a message naming what is wrong:
 - rank files swapped, or one replaced by another rank's, by the same
   rank's file of another step, or by the same rank's file of another run
   at the same step (told apart by the file digests index.json records);
 - index.json's holders of a unit permuted or duplicated;
 - two tensors' data_offsets overlapping;
 - one bit of a tensor flipped (the CRC-32 check), in a rank file and in a
   full checkpoint, also behind a CRC-32 the header damaged (not hex, 9
   digits, missing, __metadata__ not an object);
 - a tensor of another dtype and shape (a rank file, and --load-full);
 - index.json's step negative, 2^63-1, or 2^63-2 with a step to run; a
   unit's size or shard size not the plan's, or the format version 1.
And the files around them:
 - --save-checkpoint over a directory that is not a checkpoint (a user's
   index.json too), or over a regular file, is refused before training and
   leaves them as they were; so are destinations that overlap (--save-state
   and --save-checkpoint one directory, --output-dir inside the checkpoint);
 - a save killed between its two renames (only ck.old and a finished
   ck.tmp left) resumes from ck.tmp, and the next save puts ck in place;
 - --save-checkpoint ck/ (a trailing slash) writes ck.
Exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpt2_job  # noqa: E402

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader")


class Runner:
    def __init__(self, bindir: Path, work: Path):
        self.bindir, self.work = bindir, work

    def __call__(self, *flags, world: int = 2):
        cmd = ([] if world == 1 else ["mpirun", "-np", str(world), "--oversubscribe"]) + [
            str(self.bindir / "fsdp-run"), str(self.work / "g2.plan"),
            "--input", f"input_ids={self.work / 'ids.npy'}",
            "--input", f"labels={self.work / 'labels.npy'}",
            "--lr", "1e-3", "--threads", "1", *map(str, flags)]
        return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)


def read_st(path: Path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_st(path: Path, header: dict, body: bytes):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args(argv)
    bindir = args.build.resolve() / "bin"
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        gpt2_job.prepare(args.build.resolve(), work)
        run = Runner(bindir, work)
        ck = work / "ck"
        proc = run("--steps", 1, "--save-checkpoint", f"{ck}/",
                   "--save-full", work / "full.safetensors")
        good = proc.returncode == 0 and (ck / "index.json").exists() and \
            not (work / "ck.tmp").exists()
        print(f"--save-checkpoint ck/ (trailing slash): {'ok' if good else 'FAILED'} "
              f"{proc.stderr[-300:]}")
        ok &= good
        if not good:  # the rest still runs, on a checkpoint saved without the slash
            shutil.rmtree(work / "ck.tmp", ignore_errors=True)
            run("--steps", 1, "--save-checkpoint", ck)
        proc = run("--steps", 2, "--save-checkpoint", work / "ck2")
        assert proc.returncode == 0, proc.stderr
        index = json.loads((ck / "index.json").read_text())
        unit = next(iter(index["units"]))

        def expect_refused(what: str, path: Path, needle: str, *flags):
            nonlocal ok
            proc = run("--steps", 1, *(flags or ("--resume", path)))
            good = proc.returncode != 0 and needle in proc.stderr
            line = next((l for l in proc.stderr.splitlines() if needle in l),
                        proc.stderr[-400:] or proc.stdout[-400:])
            print(f"{what}: {'refused' if good else 'NOT REFUSED'}: {line.strip()}")
            ok &= good

        def copy(name: str) -> Path:
            out = work / name
            shutil.copytree(ck, out)
            return out

        c = copy("swapped")
        (c / "rank-0.safetensors").rename(c / "x")
        (c / "rank-1.safetensors").rename(c / "rank-0.safetensors")
        (c / "x").rename(c / "rank-1.safetensors")
        expect_refused("rank files swapped", c, "says it is rank 1 of 2")
        c = copy("replaced")
        shutil.copy(c / "rank-0.safetensors", c / "rank-1.safetensors")
        expect_refused("rank 1's file replaced by rank 0's", c, "says it is rank 0 of 2")
        c = copy("other-step")
        shutil.copy(work / "ck2" / "rank-1.safetensors", c / "rank-1.safetensors")
        expect_refused("rank 1's file from another checkpoint", c, "at step 2, but")
        # Another run's rank file of the same rank, world and step: it is
        # consistent in itself; only the index's digest tells it apart.
        other = work / "other"
        other.mkdir(exist_ok=True)
        shutil.copy(work / "g2.plan", other / "g2.plan")
        rng = np.random.default_rng(1)
        np.save(other / "ids.npy", rng.integers(0, 64, (4, 16)).astype(np.int64))
        np.save(other / "labels.npy", rng.integers(0, 64, (4, 16)).astype(np.int64))
        proc = Runner(bindir, other)("--steps", 1, "--save-checkpoint", other / "ck")
        assert proc.returncode == 0, proc.stderr
        c = copy("other-run")
        shutil.copy(other / "ck" / "rank-1.safetensors", c / "rank-1.safetensors")
        expect_refused("rank 1's file from another run at the same step", c,
                       "is not the file")
        for name, holders, needle in (("permuted", [1, 0], "holders permuted or duplicated"),
                                      ("duplicated", [0, 0], "not distinct ranks")):
            c = copy(name)
            bad = json.loads((c / "index.json").read_text())
            bad["units"][unit]["holders"] = holders
            (c / "index.json").write_text(json.dumps(bad))
            expect_refused(f"holders {name}", c, needle)
        c = copy("overlap")
        header, body = read_st(c / "rank-0.safetensors")
        names = [k for k in header if k != "__metadata__"]
        first = min(names, key=lambda k: header[k]["data_offsets"][0])
        second = sorted(names, key=lambda k: header[k]["data_offsets"][0])[1]
        b0 = header[first]["data_offsets"][0]
        size = header[second]["data_offsets"][1] - header[second]["data_offsets"][0]
        header[second]["data_offsets"] = [b0, b0 + size]
        write_st(c / "rank-0.safetensors", header, body)
        expect_refused("two tensors' data_offsets overlapping", c, "(the two overlap)")
        c = copy("flipped")
        header, body = read_st(c / "rank-1.safetensors")
        begin = header[unit]["data_offsets"][0]
        body = bytearray(body)
        body[begin + 3] ^= 0x40  # the first float's highest exponent bit
        write_st(c / "rank-1.safetensors", header, bytes(body))
        expect_refused("one exponent bit flipped", c, "fails its CRC-32 check")
        c = copy("dtype")
        header, body = read_st(c / "rank-0.safetensors")
        header[unit]["dtype"] = "I32"
        write_st(c / "rank-0.safetensors", header, body)
        expect_refused("a unit's shard of another dtype", c, "as I32 [")
        for step in (-5, 2**63 - 1):
            c = copy(f"step{step}")
            bad = json.loads((c / "index.json").read_text())
            bad["step"] = step
            (c / "index.json").write_text(json.dumps(bad))
            expect_refused(f"step {step}", c, f"has step '{step}'")
        c = copy("step-max")
        bad = json.loads((c / "index.json").read_text())
        bad["step"] = 2**63 - 2
        (c / "index.json").write_text(json.dumps(bad))
        for rank in (0, 1):  # the rank files agree: only the step is too large
            header, body = read_st(c / f"rank-{rank}.safetensors")
            header["__metadata__"]["step"] = str(2**63 - 2)
            write_st(c / f"rank-{rank}.safetensors", header, body)
        expect_refused("step 2^63-2 and one more step", c, "would overflow the step count")
        c = copy("no-shard")
        bad = json.loads((c / "index.json").read_text())
        bad["units"][unit]["shard_numel"] = 0
        (c / "index.json").write_text(json.dumps(bad))
        expect_refused("a unit's shards of 0 elements", c, "holders of shards of 0 elements")
        c = copy("layout")
        bad = json.loads((c / "index.json").read_text())
        bad["units"][unit]["unpadded_numel"] += 1
        (c / "index.json").write_text(json.dumps(bad))
        expect_refused("a unit of another size", c, "(another model, or another wrapping)")
        c = copy("old-format")
        bad = json.loads((c / "index.json").read_text())
        del bad["version"]
        (c / "index.json").write_text(json.dumps(bad))
        expect_refused("an index of format 1", c, "of sharded format version 1")

        # A full checkpoint: a flipped bit, and a tensor declared I32 with
        # its dimensions swapped (the same number of bytes).
        header, body = read_st(work / "full.safetensors")
        matrix = next(k for k, v in header.items()
                      if k != "__metadata__" and len(v.get("shape", [])) == 2)
        flipped = bytearray(body)
        flipped[header[matrix]["data_offsets"][0] + 3] ^= 0x40
        write_st(work / "flipped.safetensors", header, bytes(flipped))
        expect_refused("full checkpoint with a flipped bit", None, "fails its CRC-32 check",
                       "--load-full", work / "flipped.safetensors")
        # The same flipped bit behind a CRC-32 the header damaged: one that
        # does not parse, one missing, metadata that is not an object.
        # Each turned the check off, and the damaged tensor trained.
        damaged = [("a CRC-32 that is not hex", "malformed CRC-32",
                    lambda m: {**m, f"crc32:{matrix}": "zzzzzzzz"}),
                   ("a CRC-32 of 9 digits", "malformed CRC-32",
                    lambda m: {**m, f"crc32:{matrix}": "0" + m[f"crc32:{matrix}"]}),
                   ("a CRC-32 missing", f"none for '{matrix}'",
                    lambda m: {k: v for k, v in m.items() if k != f"crc32:{matrix}"}),
                   ("__metadata__ a list", "__metadata__ is not an object",
                    lambda m: [])]
        for i, (what, needle, edit) in enumerate(damaged):
            bent = {**header, "__metadata__": edit(header["__metadata__"])}
            write_st(work / f"bent{i}.safetensors", bent, bytes(flipped))
            expect_refused(f"full checkpoint with a flipped bit and {what}", None, needle,
                           "--load-full", work / f"bent{i}.safetensors")
        rows, cols = header[matrix]["shape"]
        header[matrix]["dtype"], header[matrix]["shape"] = "I32", [cols, rows]
        write_st(work / "retyped.safetensors", header, body)
        expect_refused("full checkpoint with an I32 tensor", None,
                       f"as I32 [{cols}, {rows}], the plan as F32 [{rows}, {cols}]",
                       "--load-full", work / "retyped.safetensors")

        # Saves replace only what a save wrote, and say so before training.
        notes = work / "experiment"
        notes.mkdir()
        (notes / "notes.txt").write_text("x")
        proc = run("--steps", 1, "--save-state", work / "state-never", "--save-checkpoint", notes)
        good = (proc.returncode != 0 and "notes.txt" in proc.stderr and
                (notes / "notes.txt").read_text() == "x" and "step 1" not in proc.stdout and
                not (work / "state-never").exists())
        print(f"--save-checkpoint over a directory with notes.txt: "
              f"{'refused before training' if good else 'NOT REFUSED'}: {proc.stderr.strip()[-300:]}")
        ok &= good
        # Destinations that overlap: found after the training, the
        # checkpoint was lost (or the next save refused the directory).
        for flags, needle in (
                (("--save-state", work / "both", "--save-checkpoint", work / "both"),
                 "--save-state and --save-checkpoint both name"),
                (("--output-dir", work / "outer" / "out", "--save-checkpoint", work / "outer"),
                 "--output-dir '" + str(work / "outer" / "out") + "' lies inside --save-checkpoint")):
            proc = run("--steps", 1, *flags)
            good = proc.returncode != 0 and needle in proc.stderr and "step 1" not in proc.stdout
            print(f"{' '.join(str(f) for f in flags[::2])} overlapping: "
                  f"{'refused before training' if good else 'NOT REFUSED'}: {proc.stderr.strip()[-300:]}")
            ok &= good
        user = work / "user-json"
        user.mkdir()
        (user / "index.json").write_text('{"my": "data"}')
        proc = run("--steps", 1, "--save-checkpoint", user)
        good = (proc.returncode != 0 and "not a sharded checkpoint's index" in proc.stderr
                and (user / "index.json").read_text() == '{"my": "data"}'
                and "step 1" not in proc.stdout)
        print(f"--save-checkpoint over a user's index.json: "
              f"{'refused before training' if good else 'NOT REFUSED'}: {proc.stderr.strip()[-300:]}")
        ok &= good
        afile = work / "afile"
        afile.write_text("mine")
        proc = run("--steps", 1, "--save-checkpoint", afile)
        good = proc.returncode != 0 and afile.read_text() == "mine" and "afile" in proc.stderr
        print(f"--save-checkpoint over a regular file: {'refused' if good else 'NOT REFUSED'}: "
              f"{proc.stderr.strip()[-200:]}")
        ok &= good

        # A save killed between its two renames: ck.old (step 1) and a
        # finished ck.tmp (step 2), no ck.
        killed = work / "killed"
        shutil.copytree(ck, work / "killed.old")
        shutil.copytree(work / "ck2", work / "killed.tmp")
        proc = run("--steps", 1, "--resume", killed, "--save-checkpoint", killed)
        saved = json.loads((killed / "index.json").read_text())["step"] \
            if (killed / "index.json").exists() else None
        good = (proc.returncode == 0 and "step 3 loss" in proc.stdout and
                "killed.tmp" in proc.stderr and saved == 3 and
                not (work / "killed.old").exists() and not (work / "killed.tmp").exists())
        print(f"a save killed between its renames: resumed from ck.tmp at step 2, saved "
              f"step {saved}, no leftovers: {'ok' if good else 'WRONG'} {proc.stderr.strip()[-300:]}")
        ok &= good
        # Only ck.old left: the next save puts it back as ck before anything
        # is deleted, and resuming finds it.
        shutil.copytree(ck, work / "lone.old")
        proc = run("--steps", 1, "--resume", work / "lone")
        good = proc.returncode == 0 and "step 2 loss" in proc.stdout and "lone.old" in proc.stderr
        print(f"only ck.old left: resumed from it: {'ok' if good else 'WRONG'} {proc.stderr.strip()[-300:]}")
        ok &= good
    print("hostile checkpoints: " + ("all ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
