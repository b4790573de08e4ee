"""README.md's recording-backend example is tests/recording/readme_example_test.cc,
line for line (the test that builds and runs it), so the README's recipe
cannot rot.

    readme_example_in_sync_test.py README.md readme_example_test.cc
"""

import re
import sys
import unittest

import junit_unittest

README, EXAMPLE = None, None


class ReadmeExampleInSync(unittest.TestCase):
    def test_the_readme_shows_the_tested_file(self):
        with open(README) as f:
            readme = f.read()
        with open(EXAMPLE) as f:
            example = f.read()
        blocks = re.findall(r"```c\+\+\n(.*?)```", readme, flags=re.S)
        self.assertIn(example, blocks, "README.md has no ```c++ block equal to tests/recording/readme_example_test.cc; "
                      "copy the file into it (or the block into the file)")


if __name__ == "__main__":
    README, EXAMPLE = sys.argv[1], sys.argv[2]
    junit_unittest.main(argv=sys.argv[3:])
