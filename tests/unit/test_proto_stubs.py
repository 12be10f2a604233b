"""The committed stubs are exactly what the proto generates (`make proto`)."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
STUB_DIR = ROOT / "client" / "geval_client" / "pb"


def test_committed_stubs_match_the_proto(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_proto.py"), str(tmp_path)], check=True)
    generated = sorted(p.name for p in tmp_path.iterdir())
    assert generated == ["reward_pb2.py", "reward_pb2.pyi", "reward_pb2_grpc.py"]
    for name in generated:
        committed = (STUB_DIR / name).read_text()
        assert committed == (tmp_path / name).read_text(), f"{name} is stale: run `make proto`"
