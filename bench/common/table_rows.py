"""What the benches' table tests share: run a bench's table.py on a run's
JSON and read back its Markdown rows as {measure: [the other cells]}."""
import subprocess
import sys


def table_rows(table_py, bench_json, *args):
    r = subprocess.run([sys.executable, table_py, bench_json] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert r.returncode == 0, r.stdout
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")]
                                              for line in r.stdout.splitlines() if line.startswith("| "))}
