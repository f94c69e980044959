"""The benchmarks' figures as the text `xsyn bench` prints (one function per table, each from the figures
the bench returns; `--json` prints the figures themselves)."""

from __future__ import annotations

import json
from typing import Any

from xsyn.models.names import ENCODER_SHAPES
from xsyn.models.variants import baseline_name


def _kernel_note(result: dict) -> str:
    if result["device"] != "cpu":
        return f"torch ops on {result['device_name']}"
    if result["tree_kernel"] == "c":
        return f"C kernel; torch ops alone: {result['tensor_sentences_per_s_torch_ops']:,.0f}"
    return "torch ops: the C kernel was not built, see docs/getting-started.md (Install)"


def syntax_text(result: dict[str, Any]) -> str:
    """`run_syntax_bench`'s figures."""
    lines: list[str] = []
    lines.append(f"sentences:                 {result['sentences']} ({result['pieces']} pieces)")
    lines.append(f"tensor step:               {result['tensor_sentences_per_s']:,.0f} sentences/s "
                 f"({result['tensor_sentences_per_s_shuffled']:,.0f} in shuffled batches, "
                 f"{result['tensor_sentences_per_s_length_bucketed']:,.0f} in length-bucketed ones; "
                 f"{_kernel_note(result)})")
    padding = result["padded_pairs_per_pair"]
    lines.append(f"padded pairs per real one: {padding['treebank_order']:.2f} ({padding['shuffled']:.2f} shuffled, "
                 f"{padding['length_bucketed']:.2f} length-bucketed)")
    lines.append(f"records -> padded batch:   {result['pipeline_segments_per_s']:,.0f} segments/s")
    lines.append(f"stored per wordpiece:      {result['bytes_per_piece']:.2f} bytes")
    return "\n".join(lines)


def rows_text(results: dict[str, dict], peak: float | None) -> str:
    """`measure`'s rows, one line each (with the compiling step's seconds and recompiles where compiled), and
    how MFU was reckoned."""
    lines = [f"{'row':<18} {'ms/step':>9} {'median':>9} {'time x':>7} {'peak MB':>9} {'memory x':>9} {'grads MB':>9} "
             f"{'tokens/s':>10} {'TFLOP/s':>8} {'MFU':>6} {'ops x':>6} {'syntax params':>14}"
             + (f" {'cpu x':>6}" if "cpu_time_ratio" in results[baseline_name()] else "")
             + (f" {'compile s':>9} {'recompiles':>10}" if "compile_seconds" in results[baseline_name()] else "")]
    for row, r in results.items():
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "-"
        extra = f" {r['cpu_time_ratio']:>6.3f}" if "cpu_time_ratio" in r else ""
        extra += f" {r['compile_seconds']:>9.1f} {r['recompiles']:>10}" if "compile_seconds" in r else ""
        lines.append(f"{row:<18} {1000 * r['step_seconds']:>9.1f} {1000 * r['median_seconds']:>9.1f} "
                     f"{r['step_time_ratio']:>7.3f} {r['peak_bytes'] / 2**20:>9.1f} {r['peak_memory_ratio']:>9.3f} "
                     f"{r['gradient_bytes'] / 2**20:>9.1f} "
                     f"{r['tokens_per_second']:>10,.0f} {r['flops_per_step'] / r['step_seconds'] / 1e12:>8.2f} "
                     f"{mfu:>6} {r['ops_ratio']:>6.2f} {r['syntax_parameters']:>14,}{extra}")
    if "cpu_time_ratio" in results[baseline_name()]:
        lines.append("cpu x: median CPU time of a step against none's (steady on a shared machine; OMP_NUM_THREADS=1)")
    lines.append("MFU: give --peak-tflops (the device's peak for this dtype) to compute it" if peak is None else
                 f"MFU: FLOPs per step / step time / {peak:g} TFLOP/s")
    return "\n".join(lines)


def ops_text(results: dict[str, dict]) -> str:
    """`count_ops`' rows: each variant's ops per step, their ratio to the baseline's and the ops it adds most."""
    lines = [f"{'variant':<10} {'ops/step':>9} {'x ' + baseline_name():>7}  most added over {baseline_name()}"]
    base = results[baseline_name()]["ops"]
    for variant, r in results.items():
        added = sorted(((n - base.get(op, 0), op) for op, n in r["ops"].items()), reverse=True)
        top = ", ".join(f"{op.removeprefix('aten.')} +{n}" for n, op in added[:4] if n > 0) or "-"
        lines.append(f"{variant:<10} {r['ops_per_step']:>9,} {r['ops_ratio']:>7.3f}  {top}")
    return "\n".join(lines)


def embedding_text(costs: dict[str, dict]) -> str:
    """The `none` model's embedding matrix, encoder by encoder (`embedding_costs`)."""
    lines: list[str] = []
    mib = 2 ** 20
    lines.append("\nthe embedding matrix (none): parameters, the step with it trained / frozen, AdamW")
    lines.append(f"{'encoder':<11} {'params M':>9} {'embedding':>10} {'ms/step':>9} {'frozen':>9} {'peak MB':>9} "
                 f"{'frozen':>9} {'word emb MB':>11} {'AdamW ms':>9} {'Adam state MB':>13}")
    for name, c in costs.items():
        lines.append(f"{name:<11} {c['parameters'] / 1e6:>9.1f} {c['embedding_share']:>10.1%} "
                     f"{1000 * c['step_seconds']:>9.1f} {1000 * c['step_seconds_frozen_embeddings']:>9.1f} "
                     f"{c['peak_bytes'] / mib:>9.1f} {c['peak_bytes_frozen_embeddings'] / mib:>9.1f} "
                     f"{c['word_embedding_bytes'] / mib:>11.1f} {1000 * c['optimizer_step_seconds']:>9.1f} "
                     f"{c['optimizer_state_bytes'] / mib:>13.1f}")
    return "\n".join(lines)


def eval_text(result: dict[str, Any]) -> str:
    """`run_eval_bench`'s figures."""
    lines: list[str] = []
    lines.append(f"generalized pair cost / language cost: {result['generalized_pair_cost_ratio']:.3f}")
    lines.append(f"training time waiting for data:       {result['data_wait_fraction']:.2%} "
                 f"(step {1000 * result['step_seconds_compute']:.1f} ms without it)")
    lines.append(f"collating one training batch:         {1000 * result['collate_seconds_per_batch']:.2f} ms")
    lines.append(f"at a {1000 * result['simulated_step_seconds']:.1f} ms step, waiting for data: "
                 f"{result['data_wait_fraction_inline']:.2%} (collating in the loop)")
    return "\n".join(lines)


def parse_text(result: dict[str, Any]) -> str:
    """`run_parse_bench`'s figures: the worker counts' rows and the parse cache's rates."""
    lines: list[str] = []
    before, repeats, cache = result["load_average_before"], result["repeats"], result["cache"]
    lines.append(f"{result['sentences']} distinct sentences, {result['parser']}, {result['cores']} cores; load average "
                 f"{' '.join(f'{x:.2f}' for x in before or [])} before, "
                 f"{' '.join(f'{x:.2f}' for x in result['load_average_after'] or [])} after")
    lines.append(f"median of {repeats} turns; machine = the same pure-Python loop in N processes at once")
    lines.append("workers  sentences/s  speedup  efficiency  per added core  sentences/CPU-s  machine speedup  "
                 "vs machine")
    for row in result["parse"]:
        added = f"{row['added_core_efficiency']:.2f}" if row["added_core_efficiency"] is not None else "-"
        lines.append(f"{row['workers']:>7}  {row['sentences_per_s']:>11,.0f}  {row['speedup']:>7.2f}  "
                     f"{row['efficiency']:>10.2f}  {added:>14}  {row['sentences_per_cpu_s']:>15,.0f}  "
                     f"{row['machine_speedup']:>15.2f}  {row['speedup_vs_machine']:>10.2f}")
    lines.append(f"parse cache at {cache['entries']:,} entries ({cache['bytes'] / 2**20:,.0f} MiB): "
                 f"{cache['writes_per_s']:,.0f} writes/s, opened in {cache['open_seconds']:.1f}s, "
                 f"{cache['lookups_per_s']:,.0f} lookups/s (per CPU-second: {cache['writes_per_cpu_s']:,.0f} writes, "
                 f"{cache['lookups_per_cpu_s']:,.0f} lookups; open {cache['open_cpu_seconds']:.1f} CPU-s)")
    return "\n".join(lines)


def model_json(figures: dict[str, Any]) -> dict[str, Any]:
    """What `xsyn bench model --json` prints: per encoder ({encoder: {rows, embedding}}) where `--encoders` chose
    them; else per row its step-time and memory ratios to `none` (rounded to 4 places) and its other figures;
    with `--count-ops` the op counts."""
    if "ops" in figures:
        return figures["ops"]
    if "encoders" in figures:
        return figures["encoders"]
    ratios = ("step_time_ratio", "peak_memory_ratio")
    return {v: {**{k: round(r[k], 4) for k in ratios}, **{k: x for k, x in r.items() if k not in ratios}}
            for v, r in figures["rows"].items()}


def model_text(figures: dict[str, Any], layers: int, hidden: int, seq_len: int, dtype: str,
               compile_mode: str | None) -> str:
    """`run_model_bench`'s figures: the op counts (`--count-ops`); else the rows of the one shape, or of each
    encoder and what its embedding matrix costs."""
    if "ops" in figures:
        return (f"ATen ops (views aside) of one eager forward + backward, {layers} layers, hidden {hidden}, batch "
                f"{figures['batch_size']} x {seq_len} pieces, {figures['device']} {figures['dtype']}\n"
                + ops_text(figures["ops"]))
    where = f"{figures['device']} {dtype}" + (f", compiled ({compile_mode})" if compile_mode else "")
    ran = f"batch {figures['batch_size']} x {seq_len} pieces, {where}, fastest (and median) of {figures['repeats']} " \
          "interleaved rounds"
    if "encoders" not in figures:
        return (f"forward + backward, {layers} layers, hidden {hidden}, {ran}; plain_bert: transformers' "
                "BertForSequenceClassification (sdpa)\n" + rows_text(figures["rows"], figures["peak_tflops"]))
    lines = [f"\n{name} ({ENCODER_SHAPES[name].family}): forward + backward, {ran}\n"
             + rows_text(figure["rows"], figures["peak_tflops"]) for name, figure in figures["encoders"].items()]
    return "\n".join([*lines, embedding_text({name: figure["embedding"] for name, figure in
                                              figures["encoders"].items()})])


def loop_output(result: dict[str, Any], as_json: bool) -> str:
    """What `xsyn bench loop` prints: the figures as one JSON object, or as `loop_text`."""
    return json.dumps(result) if as_json else loop_text(result)


def loop_text(result: dict[str, Any]) -> str:
    """`run_loop_bench`'s figures: one line per batching and timing, then the batches' shapes and padding."""
    lines = [f"{result['task']}, {result['model']} ({result['variant']}), batch {result['batch_size']}, max length "
             f"{result['max_length']}, {result['steps']} steps, {result['threads']} CPU threads",
             f"{'batching':<9} {'':5} {'examples/s':>10} {'per CPU s':>10} {'median s':>9} {'p90 s':>8} "
             f"{'1st shape s':>11}"]
    for name, scheme in result["batchings"].items():
        for timing in ("loop", "bare"):
            t = scheme[timing]
            first = t["first_shape_seconds"]["median"]
            lines.append(f"{name:<9} {timing:5} {t['examples_per_second']:>10.1f} "
                         f"{t['examples_per_cpu_second']:>10.1f} {t['step_seconds_median']:>9.4f} "
                         f"{t['step_seconds_p90']:>8.4f} {'-' if first is None else f'{first:.4f}':>11}")
    for name, scheme in result["batchings"].items():
        b, e, v = scheme["batches"], scheme["epoch"], scheme["evaluation"]
        lines.append(f"{name}: loop/bare {scheme['loop_over_bare']:.3f}; padded share {b['padded_share']:.1%} and "
                     f"{b['distinct_shapes']} shapes in the steps timed, {e['padded_share']:.1%} and "
                     f"{e['distinct_shapes']} in an epoch; dev evaluation {v['padded_share']:.1%} and "
                     f"{v['distinct_shapes']} shapes ({_settings_text(scheme['settings'])})")
    if "default_over_random" in result:
        ratio = result["default_over_random"]
        lines.append(f"default over random: {ratio['examples_per_second']:.2f}x examples/s, "
                     f"{ratio['examples_per_cpu_second']:.2f}x per CPU second; real tokens: "
                     f"{ratio['real_tokens_per_second']:.2f}x a second, {ratio['real_tokens_per_cpu_second']:.2f}x "
                     "per CPU second")
    return "\n".join(lines)


def _settings_text(settings: dict[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in settings.items())


def peer_text(result: dict[str, Any]) -> str:
    """`xsyn bench peer`'s tables: training, scoring and the one-step command, xsyn against transformers' Trainer
    (medians over the repeats; accuracy mean +- sd over the seeds), and the ratios the targets are about."""
    summary, settings = result["summary"], result["settings"]
    lines = [f"{settings['train_rows']} training rows ({settings['held_out']} held out for the accuracy), batch "
             f"{settings['batch_size']}, max length {settings['max_length']}, {settings['epochs']:g} epoch(s), "
             f"{settings['threads']} thread each, {settings['repeats']} interleaved repeat(s); load "
             f"{result['load_before'][0]:g} before, {result['load_after'][0]:g} after", "",
             "| training | examples/s (lowest-highest) | CPU s per example | padded share | accuracy |",
             "|---|---|---|---|---|"]
    for arm, row in summary["training"].items():
        low, high = row["examples_per_second_range"]
        lines.append(f"| {arm} | {row['examples_per_second']:.1f} ({low:.1f}-{high:.1f}) | "
                     f"{row['cpu_seconds_per_example']:.4f} | "
                     f"{row['padded_share']:.1%} | {row['accuracy']['mean']:.1f} +- {row['accuracy']['sd']:.1f} |")
    lines += ["", "| scoring | command s | scoring s | padded share |", "|---|---|---|---|"]
    for arm, row in summary["scoring"].items():
        lines.append(f"| {arm} | {row['command_seconds']:.2f} | {row['scoring_seconds']:.2f} | "
                     f"{row['padded_share']:.1%} |")
    lines += ["", "| one step | command s (lowest-highest) |", "|---|---|"]
    lines += [f"| {arm} | {seconds:.2f} ({low:.2f}-{high:.2f}) |" for arm, seconds in summary["one_step"].items()
              for low, high in [summary["one_step_range"][arm]]]
    lines += ["", *(f"{name}: {ratio:.3f}x" for name, ratio in summary["ratios"].items())]
    return "\n".join(lines)
