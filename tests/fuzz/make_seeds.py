#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses (tests/fuzz/<harness>/good-*,
bad-*) from the loader test data in tests/data and from messages built here.
Inputs found by fuzzing (regress-*) are kept; the seeds are rewritten.

    python3 tests/fuzz/make_seeds.py
"""
import gzip
import os
import shutil
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
RUN_ID = 0x0123456789ABCDEF  # FUZZ_RUN_ID in fuzz_wire.c
MASK = (1 << 64) - 1


def reset(harness):
    d = os.path.join(HERE, harness)
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        if name.startswith("good-") or name.startswith("bad-"):
            os.remove(os.path.join(d, name))
    return d


def write(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def stripped(name):
    """A test file's name without its own good/bad prefix."""
    for prefix in ("good_", "good-", "bad_", "bad-"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- text readers: the loader tests' files, renamed good-/bad- -------------
def text_corpus(harness, src, max_size=4096):
    d = reset(harness)
    for name in sorted(os.listdir(os.path.join(DATA, src))):
        if name == "README.md":
            continue
        data = read(os.path.join(DATA, src, name))
        if len(data) > max_size:  # a large seed slows every run down
            continue
        kind = "good" if name.startswith("good") else "bad"
        if name == "bad_beyond_dim.svm":  # refused only against a fixed dim; the harness infers it
            kind = "good"
        write(d, kind + "-" + stripped(name), data)


# ---- IDX: uint32 length of the images file, images, labels -------------------
def idx_corpus():
    d = reset("idx")
    src = os.path.join(DATA, "idx")
    images = read(os.path.join(src, "good-images-idx3-ubyte"))
    labels = read(os.path.join(src, "good-labels-idx1-ubyte"))

    def pair(i, l):
        return struct.pack("<I", len(i)) + i + l

    write(d, "good-raw", pair(images, labels))
    write(d, "good-gzip", pair(read(os.path.join(src, "good-images-idx3-ubyte.gz")),
                               read(os.path.join(src, "good-labels-idx1-ubyte.gz"))))
    for name in sorted(os.listdir(src)):
        if not name.startswith("bad") and not name.startswith(("truncated", "trailing", "huge", "short", "zero", "count")):
            continue
        data = read(os.path.join(src, name))
        if "images" in name:
            write(d, "bad-" + stripped(name), pair(data, labels))
        else:
            write(d, "bad-" + stripped(name), pair(images, data))
    write(d, "bad-empty", b"")
    write(d, "bad-claims-2e31-images", pair(struct.pack(">IIII", 0x803, 1 << 31, 28, 28) + bytes(16), labels))
    # The good images gzip'd, then a second member of 1 MiB of zeros: refused
    # after the bytes the header declares, without inflating the rest.
    write(d, "bad-gz-then-1mib-zeros", pair(gzip.compress(images, mtime=0) + gzip.compress(bytes(1 << 20), mtime=0), labels))


# ---- gzip input: tests/data/gz/'s .gz files ---------------------------------
def gz_corpus():
    d = reset("gz")
    src = os.path.join(DATA, "gz")
    for name in sorted(os.listdir(src)):
        if name.endswith(".gz"):
            kind = "bad" if name.startswith("bad") else "good"
            write(d, kind + "-" + name.split("bad-", 1)[-1], read(os.path.join(src, name)))


# ---- flags: a mode byte (low 3 bits the parser, the rest a parameter), then NUL-separated strings
def flags_corpus():
    d = reset("flags")
    seeds = {
        "good-train": (0, ["--model", "logreg", "--lr", "0.5", "--threads", "2", "--data", "gen:sparse:n=100"]),
        "good-mlp": (0, ["--model", "mlp", "--hidden=64,32", "--batch", "16", "--optimizer", "adagrad"]),
        "good-dist": (0, ["--sync", "ssp", "--staleness", "4", "--workers", "3", "--delay-worker", "1:5,2:uniform:1,3"]),
        "good-help": (0, ["--help"]),
        "bad-unknown-flag": (0, ["--no-such-flag", "1"]),
        "bad-range": (0, ["--threads", "0"]),
        "bad-hidden": (0, ["--model", "mlp", "--hidden", "64,,32"]),
        "bad-twice": (0, ["--lr", "0.1", "--lr", "0.2"]),
        "bad-missing-value": (0, ["--lr"]),
        "bad-nan": (0, ["--lr", "nan"]),
        "bad-allreduce-servers": (0, ["--sync", "bsp", "--push-every", "4"]),
        "good-delay-worker": (1 | 1 << 3, ["0:5,1:exp:3"]),
        "bad-delay-worker": (1, ["0:uniform:5,2"]),
        "bad-delay-worker-id": (1, ["99:5"]),
        "good-delay-model": (2, ["geometric:0.25,max=40"]),
        "good-straggler": (2, ["straggler:slow=8,n=1"]),
        "bad-delay-model": (2, ["uniform:5,2"]),
        "good-data-gen": (3 | 1 << 3, ["gen:sparse:n=1000,dim=50,nnz=5"]),
        "good-data-file": (3 | 2 << 3, ["ratings.csv"]),
        "good-data-fashion": (3, ["fashion-mnist"]),
        "bad-data-gen": (3 | 1 << 3, ["gen:sparse:n=-4"]),
        "bad-data-dense": (3, ["gen:sparse"]),
        "good-nodelist": (4, ["node[01-04,07],login1"]),
        "bad-nodelist": (4, ["node[01-"]),
        "good-sync": (5, ["ssp"]),
        "bad-sync": (5, ["sometimes"]),
        "good-pairs": (6, ["a=1,b=2"]),
        "bad-pairs": (6, ["a=1,,b"]),
    }
    for name, (mode, args) in seeds.items():
        write(d, name, bytes([mode]) + b"\0".join(a.encode() for a in args))


# ---- wire: messages as fuzz_wire.c cuts them ---------------------------------
def mix(x):
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def checksum(p, seed=0):
    """wire_checksum as docs/protocol.md writes it down."""
    n = len(p)
    a = [mix((seed + l + 1) & MASK) for l in range(4)]
    b = [0] * 4
    words = n // 8
    word = lambda i: struct.unpack_from("<Q", p, 8 * i)[0]
    for j in range(words // 4):
        for l in range(4):
            a[l] = (a[l] + word(4 * j + l)) & MASK
            b[l] = (b[l] + a[l]) & MASK
    for i in range(4 * (words // 4), words):
        a[0] = (a[0] + word(i)) & MASK
        b[0] = (b[0] + a[0]) & MASK
    t = struct.unpack("<Q", p[8 * words:] + bytes(8 - n % 8))[0]
    a[1] = (a[1] + t) & MASK
    b[1] = (b[1] + a[1]) & MASK
    h = mix(n ^ 0x9E3779B97F4A7C15)
    for l in range(4):
        h = (mix(h ^ a[l]) + b[l]) & MASK
    h = mix(h)
    return (h ^ (h >> 32)) & 0xFFFFFFFF


def header(type_, kind=0, count=0, frames=(), run=RUN_ID, magic=0x44475341, version=2, sender=0, shard=0,
           clock=0, version_=0, offset=0, flags=0, aux=0, csum=None):
    if csum is None:
        csum = 0
        for f in frames:
            csum = checksum(f, csum)
    return struct.pack("<IHHQIIQQQIHHII", magic, version, type_, run, sender, shard, clock, version_, offset, count,
                       kind, flags, csum, aux)


def message(mode, head, frames):
    lens = [len(f) for f in frames] + [0] * (3 - len(frames))
    return bytes([mode, len(frames), len(head)]) + struct.pack("<HHH", *lens) + head + b"".join(frames)


def wire_corpus():
    d = reset("wire")
    vals = struct.pack("<4f", 0.5, -1.0, 2.0, 0.25)
    idx = struct.pack("<4I", 3, 7, 8, 20)
    text = b"1 0 tcp://127.0.0.1:5555\n"
    enc = bytes([1, 0, 0, 0, 4, 0, 0, 0]) + struct.pack("<4e", 0.5, -1.0, 2.0, 0.25)  # descriptor, then fp16
    good = {
        "hello": (header(1, offset=1000), []),
        "push-dense": (header(3, 1, 4, [vals], offset=100, clock=2), [vals]),
        "push-sparse": (header(3, 2, 4, [idx, vals]), [idx, vals]),
        "pull-keys": (header(5, 3, 4, [idx]), [idx]),
        "params": (header(6, 1, 4, [vals], offset=4), [vals]),
        "params-values": (header(6, 6, 4, [vals], offset=9), [vals]),
        "ring-chunk": (header(10, 1, 4, [vals], aux=1), [vals]),
        "rdv-join": (header(11, 4, len(text), [text], sender=1, aux=2), [text]),
        "bye": (header(7), []),
        "empty-dense": (header(3, 1, 0, [b""]), [b""]),
        "heartbeat": (header(13, sender=1), []),
        "push-encoded": (header(3, 5, 4, [enc]), [enc]),
        "ring-gather": (header(14, 5, 4, [enc], offset=1, aux=7), [enc]),
    }
    bad = {
        "magic": (header(1, magic=0x44475342), []),
        "version": (header(1, version=3), []),
        "version-1": (header(1, version=1), []),
        "params-sparse": (header(6, 2, 4, [idx, vals]), [idx, vals]),
        "type": (header(0xFFFF), []),
        "encoded-short": (header(3, 5, 4, [b"\1\0\0"]), [b"\1\0\0"]),
        "run": (header(1, run=RUN_ID + 1), []),
        "kind": (header(3, 3, 4, [idx]), [idx]),
        "kind-for-type": (header(1, 4, len(text), [text]), [text]),
        "count": (header(3, 1, 5, [vals]), [vals]),
        "frames": (header(3, 2, 4, [idx]), [idx]),
        "three-frames": (header(3, 2, 4, [idx, vals]), [idx, vals, vals]),
        "checksum": (header(3, 1, 4, [vals], csum=1), [vals]),
        "short-header": (header(1)[:63], []),
        "huge-count": (header(3, 1, 0x40000001, [vals]), [vals]),
    }
    for mode in (0, 1):
        for name, (head, frames) in good.items():
            write(d, "good-%s-%s" % ("validate" if mode == 0 else "zmsg", name), message(mode, head, frames))
        for name, (head, frames) in bad.items():
            write(d, "bad-%s-%s" % ("validate" if mode == 0 else "zmsg", name), message(mode, head, frames))
    # A PUSH whose frame is a shared-memory reference (header flag 8) to an arena
    # no process made: zmsg_recv refuses it as BAD_SHM (wire_validate alone
    # would take the 48 bytes as 12 floats, so there is no validate twin).
    ref = struct.pack("<QQQIIQQ", 0x3146454D48534441, RUN_ID, 42, 1, 0, 4160, 48)
    write(d, "bad-zmsg-shm-reference-unmapped", message(1, header(3, 1, 12, [ref], flags=8), [ref]))
    table = b"0 0 tcp://127.0.0.1:5555\n1 1 tcp://node02:40123\n2 1 -\n"
    write(d, "good-table", bytes([2, 2]) + table)
    write(d, "bad-table-order", bytes([2, 2]) + b"1 0 a\n0 0 b\n2 1 c\n")
    write(d, "bad-table-short", bytes([2, 2]) + table[:-1])
    write(d, "bad-table-blank", bytes([2, 0]) + b"0  0 tcp://x:1\n")


if __name__ == "__main__":
    # The empty-payload vector of docs/protocol.md: the reimplementation above is the documented one.
    assert checksum(b"") == 0xC7D17C79 and checksum(b"ASGD") == 0x7FAE9E52
    text_corpus("libsvm", "libsvm")
    text_corpus("ratings", "ratings")
    idx_corpus()
    gz_corpus()
    flags_corpus()
    wire_corpus()
