"""Workflows: steps that run when their dependencies allow, a batch with one callback, a
chain, and what each failure policy does.

    python examples/workflows.py                    # the in-memory store
    python examples/workflows.py --uri mongodb://localhost:27017/?replicaSet=rs0
    python examples/workflows.py --uri ... --database app --start-only
        # only start one workflow per failure policy, for `dogs worker examples.workflows:jobs`
        # and `dogs workflows list|show` to run and show (docs/workflows.md)

fetch -> (parse, index) -> report: ``index`` fails when the page is broken, and its
``on_failure`` says what then happens to ``report``.
"""

from __future__ import annotations

from collections.abc import Sequence

from dogs_core import Batch, DogsClient, JobContext, Jobs, Workflow, chain
from dogs_mongo import Example, example_parser, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@jobs.event(max_tries=1)
async def fetch(params: dict[str, str], ctx: JobContext) -> dict[str, str]:
    return {"url": params["url"], "body": f"the words of {params['url']}"}


@jobs.event(max_tries=1)
async def parse(params: None, ctx: JobContext) -> int:
    return len(ctx.upstream("fetch").result["body"].split())


@jobs.event(max_tries=1)
async def index(params: None, ctx: JobContext) -> str:
    page = ctx.upstream("fetch").result
    if "broken" in page["url"]:
        raise RuntimeError(f"cannot index {page['url']}")
    return "indexed"


@jobs.event(max_tries=1)
async def report(params: None, ctx: JobContext) -> str:
    parts = [f"{u.name}={u.result if u.succeeded else u.state.value}" for u in ctx.upstreams]
    return f"report of workflow {ctx.workflow_id}: {', '.join(parts)}"


@jobs.event(max_tries=1)
async def thumbnail(params: dict[str, int], ctx: JobContext) -> None:
    if params["image"] % 5 == 0:
        raise ValueError(f"image {params['image']} is corrupt")


@jobs.event
async def album_done(params: dict[str, str], ctx: JobContext) -> str:
    batch = ctx.batch
    assert batch is not None
    done = f"{batch.succeeded} of {batch.total} thumbnails"
    return f"album {params['album']}: {done}, failed {len(batch.failed_ids)}"


def import_workflow(url: str, on_failure: str = "fail") -> Workflow:
    """The face of docs/workflows.md: one fetch, then parse and index in parallel, then a
    report after both."""
    wf = Workflow(f"import {url} ({on_failure})")
    fetch_step = wf.add(fetch, {"url": url})
    parse_step = wf.add(parse, after=[fetch_step])
    index_step = wf.add(index, after=[fetch_step], on_failure=on_failure)
    wf.add(report, after=[parse_step, index_step])
    return wf


async def start_policies(client: DogsClient) -> list[str]:
    """One workflow per failure policy, each with a failing ``index``."""
    policies = ("fail", "skip", "continue")
    # Many at once: one transaction for all of them (all or none).
    flows = [import_workflow(f"https://broken/{policy}", policy) for policy in policies]
    started = await client.start_workflows(flows)
    for policy, workflow in zip(policies, started, strict=True):
        print(f"started {policy!r}: {workflow.id}")
    return [workflow.id for workflow in started]


async def run(example: Example) -> None:
    client = example.client(jobs)
    if example.args.start_only:
        await start_policies(client)
        return
    async with example.workers(jobs, workers_count=8, poll_interval=0.2) as workers:
        fine = await client.start_workflow(import_workflow("https://example.com"))
        view = await client.wait_for_workflow(fine.id, timeout=60)
        print(f"{view.workflow.name}: {view.state.value}")
        print(f"  {view.step('report').outcome.result}")  # type: ignore[union-attr]

        # Many at once: one change stream for all of them, in the order they were given.
        for view in await client.wait_for_workflows(await start_policies(client), timeout=60):
            # (parse runs beside index: under "fail" it may still be running here)
            states = ", ".join(
                f"{s.name}={s.state.value}" for s in view.steps if s.name in ("index", "report")
            )
            print(f"{view.workflow.name}: {view.state.value} ({states})")

        album = Batch("album 7")
        for image in range(1, 21):
            album.add(thumbnail, {"image": image})
        album.then(album_done, {"album": "7"})
        started = await client.start_workflow(album)
        view = await client.wait_for_workflow(started.id, timeout=60)
        print(f"{view.workflow.name}: {view.state.value}: {view.steps[-1].outcome.result}")  # type: ignore[union-attr]

        chained = await client.start_workflow(
            chain((fetch, {"url": "https://example.com/a"}), parse, name="chain")
        )
        view = await client.wait_for_workflow(chained.id, timeout=60)
        print(f"chain: {view.state.value}, {view.step('parse').outcome.result} words")  # type: ignore[union-attr]

        failed = await client.start_workflow(import_workflow("https://broken/retry"))
        await client.wait_for_workflow(failed.id, timeout=60)
        retried = await client.retry_workflow(failed.id)
        print(f"retried {len(retried.step_ids)} steps of a failed workflow")
        await workers.stop()


def main(argv: Sequence[str] | None = None) -> None:
    parser = example_parser("Dogs: workflows")
    parser.add_argument(
        "--start-only", action="store_true", help="With --uri: start the policy workflows only"
    )
    run_example(run, argv, name="workflows", memory=InMemoryJobStore, parser=parser)


if __name__ == "__main__":
    main()
