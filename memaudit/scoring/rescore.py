"""Frozen rescoring (robustness, PROTOCOL §8): a new scoring variant that keeps the rollout and
changes only the judge (model or prompt file) — predictions copied from the default variant — or
also the reader model, in which case every slot is filled again from the same memory.

Each variant's passes are recorded in `score_passes` with what changed (`rescore`), so replay can
re-execute them and tables can compare the variant with the default."""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from memaudit.errors import BadInput
from memaudit.prompts import load_prompt
from memaudit.roles import RECOVERY_JUDGE, SLOT_FILL
from memaudit.runtime import Runtime
from memaudit.scoring.jobs import run_all
from memaudit.scoring.panel import Panel
from memaudit.scoring.recovery import Scorer, judge, plan_scoring, save_reconstruction, with_model
from memaudit.store import Rescore
from memaudit.types import DEFAULT_VARIANT, Reconstruction


def variant_scorer(rt: Runtime, *, judge_model: str | None, judge_prompt: str | None,
                   reader_model: str | None, panel: Panel | None = None) -> Scorer:
    scorer = Scorer.configured(rt.llm, panel, judge=with_model(rt.llm, RECOVERY_JUDGE, judge_model))
    prompt = scorer.judge_prompt
    if judge_prompt is not None:
        path = Path(judge_prompt)
        if not path.is_file():
            raise BadInput("judge prompt file not found", file=str(path))
        prompt = load_prompt(path.stem, path.parent)
    return replace(scorer, reader=with_model(rt.llm, SLOT_FILL, reader_model), judge_prompt=prompt)


async def _rejudge(rt: Runtime, scorer: Scorer, recon: Reconstruction) -> None:
    """Re-judge a copied prediction; rows without a prediction (overflow, reader failure) are copied."""
    with rt.llm.collect() as uses:
        if recon.label is not None and recon.status != "overflow":
            recon = await judge(scorer, recon)
    await save_reconstruction(rt.store, recon, uses)


async def rescore_runs(rt: Runtime, runs, variant: str, *, judge_model: str | None = None,
                       judge_prompt: str | None = None, reader_model: str | None = None,
                       panel: Panel | None = None) -> None:
    """Score every default pass of the runs again as `variant`, with the given changes (a judge
    `panel` grades instead of the configured judge alone)."""
    if variant == DEFAULT_VARIANT:
        raise BadInput(f"a rescoring variant needs its own name, not {DEFAULT_VARIANT!r}", field="variant")
    alone = panel is None or panel.solo
    if judge_model is None and judge_prompt is None and reader_model is None and alone:
        raise BadInput("nothing to change: give --judge-model, --judge-prompt, --reader-model or --judges",
                       field="variant")
    if judge_prompt is not None:  # recorded absolute, so replay finds it from any directory
        judge_prompt = str(Path(judge_prompt).resolve())
    scorer = variant_scorer(rt, judge_model=judge_model, judge_prompt=judge_prompt, reader_model=reader_model,
                            panel=panel)
    rescore = Rescore(judge_model, judge_prompt, reader_model, panel=None if alone else panel.describe())
    jobs = []
    for run_id in runs:
        await rt.store.runs.require(run_id)
        passes = await rt.store.scores.passes(run_id, DEFAULT_VARIANT)
        if not passes:
            raise BadInput(f"run {run_id!r} has no default scoring pass; run `memaudit score` first", field="runs")
        have = await rt.store.scores.keys(run_id, variant)
        for p in passes:
            cfg = p.config
            if reader_model is not None:
                run_jobs, _ = await plan_scoring(rt, scorer, run_id, [p.mode], [p.k],
                                                 context_window=cfg.context_window, dims=cfg.dims,
                                                 variant=variant, rescore=rescore)
                jobs += run_jobs  # users not ready were skipped by the default pass too
                continue
            await rt.store.scores.record_pass(run_id, p.mode, p.k, variant,
                                              replace(cfg, rescore=rescore, scorer={**cfg.scorer, **scorer.describe()}))
            for recon in await rt.store.scores.load(run_id, p.mode, k=p.k):
                if (recon.mode, recon.k, recon.user_id, recon.dimension) not in have:
                    jobs.append(partial(_rejudge, rt, scorer, replace(recon, variant=variant)))
    await run_all(rt.store, jobs)
