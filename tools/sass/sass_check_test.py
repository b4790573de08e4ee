"""sass_check on hand-written cuobjdump -sass listings (the format of
cuobjdump 13.x: one "Function : name" header per kernel, instructions as
/*addr*/ [predicate] MNEMONIC operands ;)."""
import unittest

import junit_unittest
import sass_check

HEADER = "\n\tcode for sm_90a\n\t\tFunction : %s\n\t.headerflags\t@\"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"\n"


def listing(name, body):
    lines = [HEADER % name]
    for addr, text in body:
        lines.append("        /*%04x*/                   %s ;          /* 0x000000000000 */" % (addr, text))
    return "\n".join(lines) + "\n"


LOOPED = listing("k_loop", [
    (0x0000, "LDC R1, c[0x0][0x28]"),
    (0x0010, "WARPGROUP.ARRIVE"),
    (0x0020, "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24, gsb0"),
    (0x0030, "@!P0 BRA 0x10"),
    (0x0040, "EXIT"),
])
ONCE = listing("k_once", [
    (0x0000, "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0"),
    (0x0010, "@P0 BRA 0x40"),
    (0x0020, "IADD3 R2, R2, 0x1, RZ"),
    (0x0030, "BRA 0x20"),
    (0x0040, "EXIT"),
])
SPILLS = listing("k_spill", [
    (0x0000, "STL.64 [R1+0x8], R4"),
    (0x0010, "HMMA.16816.F32.BF16 R8, R12, R16, R8"),
    (0x0020, "@!P1 BRA 0x10"),
    (0x0030, "LDL.64 R4, [R1+0x8]"),
    (0x0040, "EXIT"),
])


class SassCheckTest(unittest.TestCase):
    def funcs(self):
        return sass_check.parse_functions(LOOPED + ONCE + SPILLS)

    def test_parses_each_function_and_its_opcodes(self):
        f = self.funcs()
        self.assertEqual(sorted(f), ["k_loop", "k_once", "k_spill"])
        self.assertEqual([op for _, op, _, _ in f["k_loop"]], ["LDC", "WARPGROUP", "HGMMA", "BRA", "EXIT"])
        self.assertEqual(f["k_loop"][2][2], "HGMMA.64x128x16.F32.BF16")

    def test_predicated_branch_back_is_a_loop(self):
        self.assertEqual(sass_check.loops(self.funcs()["k_loop"]), [(0x10, 0x30)])

    def test_hgmma_inside_a_loop_passes(self):
        results = sass_check.check_function("k_loop", self.funcs()["k_loop"], ["HGMMA"], ["LDL", "STL"])
        self.assertTrue(all(ok for ok, _ in results), results)

    def test_hgmma_outside_every_loop_fails(self):
        results = sass_check.check_function("k_once", self.funcs()["k_once"], ["HGMMA"], [])
        self.assertEqual(len(results), 1)
        self.assertFalse(results[0][0])
        self.assertIn("none inside a loop", results[0][1])

    def test_required_opcode_passes_outside_a_loop_and_fails_when_absent(self):
        # --require asks only that the opcode be there (a kernel that issues
        # one tensor copy per block has no loop).
        once = sass_check.check_function("k_once", self.funcs()["k_once"], [], [], ["HGMMA"])
        self.assertEqual([ok for ok, _ in once], [True])
        self.assertIn("1 HGMMA (HGMMA.64x128x16.F32.BF16)", once[0][1])
        spill = sass_check.check_function("k_spill", self.funcs()["k_spill"], [], [], ["UTMALDG"])
        self.assertEqual([ok for ok, _ in spill], [False])
        self.assertIn("no UTMALDG at all", spill[0][1])

    def test_missing_opcode_fails_naming_the_matrix_instructions_there(self):
        results = sass_check.check_function("k_spill", self.funcs()["k_spill"], ["HGMMA"], [])
        self.assertFalse(results[0][0])
        self.assertIn("no HGMMA at all", results[0][1])
        self.assertIn("HMMA.16816.F32.BF16", results[0][1])

    def test_local_memory_fails_with_where(self):
        results = sass_check.check_function("k_spill", self.funcs()["k_spill"], [], ["LDL", "STL"])
        self.assertEqual([ok for ok, _ in results], [False, False])
        self.assertIn("LDL.64 at 0x0030", results[0][1])
        self.assertIn("STL.64 at 0x0000", results[1][1])


RES = """
Resource usage:
 Common:
  GLOBAL:0
 Function k_good:
  REG:189 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:576 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function k_stack:
  REG:255 STACK:72 SHARED:0 LOCAL:0 CONSTANT[0]:576 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


class ResUsageTest(unittest.TestCase):
    def test_parses_registers_stack_and_local(self):
        res = sass_check.parse_res_usage(RES)
        self.assertEqual(res["k_good"]["REG"], 189)
        self.assertEqual(res["k_stack"]["STACK"], 72)
        self.assertEqual(res["k_good"]["CONSTANT[0]"], 576)

    def test_stack_frame_fails_and_none_passes(self):
        res = sass_check.parse_res_usage(RES)
        self.assertTrue(sass_check.check_res("k_good", res["k_good"])[0][0])
        ok, msg = sass_check.check_res("k_stack", res["k_stack"])[0]
        self.assertFalse(ok)
        self.assertIn("STACK 72 bytes", msg)
        self.assertFalse(sass_check.check_res("k_missing", res.get("k_missing"))[0][0])


if __name__ == "__main__":
    junit_unittest.main()
