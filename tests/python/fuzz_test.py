"""A fuzz of argument types: every launcher of every family called with its
arguments replaced, one or a few at a time, by values of every other type
(None, str, bytes, floats, bools, huge and negative ints, containers,
objects whose conversions raise, tensors of other element types, devices
and layouts, malformed __cuda_array_interface__ dicts and DLPack
producers) and by junk streams and modules. Whatever it is given, a
launcher either launches or raises a klaunch.Error subclass with a one-line
message naming the launcher; nothing else escapes, and a refused call
records nothing.

    ./bazelw test //tests/python:fuzz_test     (KLAUNCH_FUZZ_SEED=N, KLAUNCH_FUZZ_ROUNDS=N)
"""

import os
import random
import unittest

import python_test_support as S
from python_test_support import CudaArray, DLPackArray, klaunch

SEED = int(os.environ.get("KLAUNCH_FUZZ_SEED", "23"))
ROUNDS = int(os.environ.get("KLAUNCH_FUZZ_ROUNDS", "40"))  # per launcher


class Raises:
    def __init__(self, exc):
        self.exc = exc

    def __index__(self):
        raise self.exc

    def __float__(self):
        raise self.exc


class BadProperty:
    @property
    def __cuda_array_interface__(self):
        raise RuntimeError("no interface today")


class BadDLPack:
    def __init__(self, result):
        self.result = result

    def __dlpack__(self, stream=None, max_version=None):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result

    def __dlpack_device__(self):
        return (2, 0)


_MAPS = []


def a_map():
    """A klaunch.TensorMap of mla_q_rope_extract_tma's q_map, encoded on a
    recording module of its own."""
    if not _MAPS:
        mla = S.klaunch_mla_prefill
        text = "klaunch-module 1\nfamily mla_prefill\nvariant mistral_small_4\nspec_hash %s\ncuda_arch 900a\n" % (
            mla.SPEC_HASH) + "".join("const %s %d\n" % kv for kv in mla.VARIANTS["mistral_small_4"].items())
        mod = mla.load_record(image=text)
        _MAPS.append(mla.mla_q_rope_extract_tma_q_map_encode(DLPackArray(0x10000, (8, 8, 64), 4, 16), module=mod))
    return _MAPS[0]


def junk(rng):
    """One value of some type no parameter expects (or of the right type but
    wrong in some other way)."""
    cai = dict(shape=(8,), typestr="<f4", data=(0x1000, False), version=3)
    options = [a_map(), S.MapSpec(0x1000, "f32", 3, rng), S.MapSpec(0x1001, "bf16", 2, rng, good=False),
        None, "", "7", b"\x00", 0.5, -0.0, float("inf"), float("nan"), True, False, 1j, [], [1], (), {}, set(),
        object(), -1, 2**32, 2**63, 2**64, -2**63, 10**30, Raises(ValueError("bad")), Raises(OverflowError("big")),
        BadProperty(), BadDLPack(ValueError("cannot")), BadDLPack("not a capsule"), BadDLPack(None),
        CudaArray(0x1000, (8,), "<f8"), CudaArray(0x1000, (8,), "<i4", device=3), CudaArray(0x1000, (2, 4), "<i4",
                                                                                              strides=(4, 8)),
        CudaArray(0x1000, (8,), "<i4", readonly=True), CudaArray(0, (0,), "<i4"),
        DLPackArray(0x1000, (8,), 4, 16, device_type=1), DLPackArray(0x1000, (8,), 10, 8), DLPackArray(0x1000, (8,), 2, 32),
        DLPackArray(0x1000, (8,), 4, 16, flags=1), DLPackArray(0x1000, (8,), 4, 16, major=0),
        DLPackArray(0x1000, (2, 2), 4, 16, strides=(1, 2)), DLPackArray(0x1000, (8,), 4, 16, versioned=False),
    ]
    for key, value in (("shape", "8"), ("shape", (-1,)), ("shape", None), ("typestr", 4), ("typestr", "<f"),
                       ("data", None), ("data", ("0x10", False)), ("data", (1.5, False)), ("data", (-8, False)),
                       ("strides", (4, 4)), ("strides", "4"), ("version", "3"), ("mask", 1)):
        bad = dict(cai)
        bad[key] = value
        o = type("Cai", (), {})()
        o.__cuda_array_interface__ = bad
        options.append(o)
    missing = dict(cai)
    del missing[rng.choice(["shape", "typestr", "data"])]
    o = type("Cai", (), {})()
    o.__cuda_array_interface__ = missing
    options.append(o)
    return rng.choice(options)


class FuzzTest(unittest.TestCase):
    def check(self, family, launcher, mod, args, **kwargs):
        mod.clear_records()
        fn = getattr(family, launcher.name)
        try:
            fn(*S.materialize(family, launcher, args, mod), module=mod, **kwargs)
        except klaunch.Error as e:
            msg = str(e)
            self.assertEqual(msg.split(": ")[0], e.status, msg)
            self.assertIn("\n", msg + "\n")
            self.assertNotIn("\n", msg)
            self.assertIn(": ", msg)
            self.assertEqual(mod.records(), [], "%s refused but recorded: %s" % (launcher.name, msg))
            return "refused"
        except Exception as e:  # what the test exists for
            self.fail("%s(%r) raised %s: %s (not a klaunch.Error)" % (launcher.name, args, type(e).__name__, e))
        return "launched"

    def test_every_launcher_takes_any_argument_without_escaping(self):
        rng = random.Random(SEED)
        outcomes = {"launched": 0, "refused": 0}
        for family in S.FAMILIES:
            for variant in family.VARIANTS:
                mod = family.load_record(variant, capacity=4, max_dynamic_shared=232448)
                for launcher in family.LAUNCHERS:
                    good = S.passing_arguments(family, launcher, variant, seed=rng.random(), tries=400) or [
                        S.arguments(launcher, rng)]
                    for _ in range(ROUNDS):
                        args = list(rng.choice(good))
                        for _ in range(rng.choice([1, 1, 1, 2, 3])):
                            args[rng.randrange(len(args))] = junk(rng)
                        kwargs = {}
                        if rng.random() < 0.1:
                            kwargs["stream"] = junk(rng)
                        if rng.random() < 0.05:
                            kwargs["check_only"] = True
                        outcomes[self.check(family, launcher, mod, args, **kwargs)] += 1
        self.assertGreater(outcomes["refused"], outcomes["launched"])
        self.assertGreater(outcomes["launched"], 0)

    def test_junk_modules_variants_and_streams(self):
        mod = S.klaunch_paged_decode.load_record("gqa8_d128")
        launcher = S.klaunch_paged_decode.LAUNCHERS[0]
        args = S.passing_arguments(S.klaunch_paged_decode, launcher, "gqa8_d128", seed=1)[0]
        for bad in (0, "gqa8_d128", object(), S.klaunch_mla_prefill.load_record("mistral_small_4")):
            with self.assertRaises(klaunch.Error):
                S.klaunch_paged_decode.paged_decode_attn_bf16(*args, module=bad)
        for bad in (0, "x", [], object()):
            for module in (mod, None):
                with self.assertRaises(klaunch.Error):
                    S.klaunch_paged_decode.paged_decode_attn_bf16(*args, module=module, variant=bad)
        self.assertEqual(mod.records(), [])


if __name__ == "__main__":
    S.main()
