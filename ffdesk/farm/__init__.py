"""The render farm: one clip's segments rendered in parallel by workers on Ray, joined here.

`ffdesk render ... --farm ADDR` plans the segments a local render would cut
(`ffdesk.pipeline.engine.plan_segments`), starts one `FarmWorker` actor per GPU slot (or per
`num_cpus` on CPU-only nodes), hands each idle worker the next segment, writes every returned
segment file (with its matte, for `--matte clip`) into the job's own manifest in order, and
joins them as a local render does (`join_planned`). The output (and its matte clip) is the local
render's, frame for frame; a killed head resumes from
the manifest like a killed local render; a lost worker's segment is rendered again elsewhere.

Modules: `ray_support` (the optional import), `address` (what `--farm` names, the token),
`slots` (workers per node), `worker` (the actor), `board` (what `farm status` reads), `head`
(the scheduling loop), `standin` (waiting stand-in stages for benchmarks); its command line is
`ffdesk.commands.farm_render`.
Ray is imported only here, and only when a farm is used.
"""
