"""Export a run's metrics.jsonl to TensorBoard event files, so a run can be watched there.

    python -m orchestrator.tensorboard_export runs/NAME [--out runs/NAME/tensorboard]
    tensorboard --logdir runs/NAME/tensorboard

One event-file folder per run (run-001, run-002, ...), one scalar per numeric metric and step,
and the applied interventions as text at their step. Uses the `tensorboard` package's own event
writer and protos (no torch: the orchestrator never imports it). Exporting again rewrites the
folder, so the export always mirrors metrics.jsonl (corrupt lines skipped with a warning, as the
report does).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from orchestrator.report_data import load_experiment


def _writer_classes():
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError:
        from orchestrator.errors import UserError

        raise UserError("tensorboard is not installed: run `pip install tensorboard` "
                        "(or `pip install -e .[tensorboard]`).") from None
    return EventFileWriter, event_pb2, summary_pb2


def export_experiment(exp_root: Path, out: Path | None = None) -> Path:
    """Write exp_root/tensorboard/<run>/events.out.tfevents.* from each run's metrics; returns
    the log folder to give `tensorboard --logdir`."""
    EventFileWriter, event_pb2, summary_pb2 = _writer_classes()
    exp = load_experiment(Path(exp_root))
    for w in exp.warnings:
        print(f"warning: {w}", file=sys.stderr)
    out = Path(out) if out else Path(exp_root) / "tensorboard"
    for run in exp.runs:
        folder = out / run.name
        shutil.rmtree(folder, ignore_errors=True)
        writer = EventFileWriter(str(folder))
        for m in run.metrics:
            values = [summary_pb2.Summary.Value(tag=k, simple_value=float(v))
                      for k, v in m.items()
                      if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)]
            writer.add_event(event_pb2.Event(wall_time=time.time(), step=int(m["step"]),
                                             summary=summary_pb2.Summary(value=values)))
        for iv in (iv for iv in exp.interventions if iv.run == run.name):
            text = f"{iv.commit[:10]}: {iv.what} [{iv.effect or 'not measured'}] {iv.effect_detail}"
            meta = summary_pb2.SummaryMetadata(
                plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
            tensor = _text_tensor(text)
            value = summary_pb2.Summary.Value(tag="interventions", metadata=meta, tensor=tensor)
            writer.add_event(event_pb2.Event(wall_time=time.time(), step=iv.step,
                                             summary=summary_pb2.Summary(value=[value])))
        writer.close()
    return out


def _text_tensor(text: str):
    from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2

    return tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[text.encode()],
                                  tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="metrics.jsonl -> TensorBoard event files")
    parser.add_argument("experiment", help="experiment folder (runs/NAME)")
    parser.add_argument("--out", default=None, help="log folder (default: runs/NAME/tensorboard)")
    args = parser.parse_args(argv)
    out = export_experiment(Path(args.experiment), Path(args.out) if args.out else None)
    print(f"written: tensorboard --logdir {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
