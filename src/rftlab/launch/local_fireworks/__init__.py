"""A local Fireworks-compatible control plane: the REST endpoints the unmodified ``fireworks-ai`` 1.2.30
SDK and eval-protocol 0.3.33 call, served on a loopback port (``rftlab serve fireworks``), so upload →
create → poll → per-epoch metrics runs with real clients and real files and no account
(docs/platforms.md §5).

Modules: ``state`` (resources, storage, pagination, signed URLs, secrets), ``datasets``, ``evaluators``
(and their build), ``jobs`` (the job resource and its states), ``runner`` (the epochs: the uploaded
evaluator run by pytest against a local policy), ``http`` (routes, authentication, errors, the request
log) and ``server`` (configuration, keys, start and clean stop).

What it imitates, from the SDK's and eval-protocol's sources (paths, methods, bodies, field names) and
the public REST and firectl pages: ``GET /verifyApiKey`` answering the account in
``x-fireworks-account-id``; secrets (accepted, value dropped); ``evaluatorsV2`` create,
``:getUploadEndpoint``, the signed-URL PUT, ``:validateUpload``, ``BUILDING`` → ``ACTIVE`` or
``BUILD_FAILED``; datasets (create, ``:upload``, signed upload, get, list paged by ``pageSize`` (50 by
default, at most 200) and ``pageToken``, ``:getDownloadEndpoint``); RFT jobs (create, get, list, cancel,
resume, delete) with ``JOB_STATE_*`` names; per-epoch ``rft-evalv3-<job>-epoch-<k>[-chunk-<n>]`` datasets
holding one ``EvaluationRow`` per rollout in ``eval_results_dataset.jsonl``.

What it cannot know, and what it does instead (each one a choice of ours, not the platform's behaviour):

- how the cloud fans a row out to its ``responseCandidatesCount`` candidates: here eval-protocol runs the
  whole chunk that many times (``--ep-num-runs``), so a row's candidates are separate rollouts sharing its
  ``row_id``;
- what ``outputMetrics`` and ``outputStats`` hold: left unset; ``acceleratorSeconds``: unset (nothing is
  billed);
- training: nothing is trained; every epoch samples the same local policy (``rftlab.policies.server``,
  ``--policy``), which the evaluator reaches through the ``model``/``base_url`` the server puts in its
  ``completion_params``, as the platform injects the model in training;
- the build: nothing is installed; the build checks that every requirement is already installed here,
  that the entry point exists and that pytest collects it;
- secrets: dropped, so the evaluator's pytest gets none (the platform injects them into its container);
- the exact error bodies and which requests the platform refuses at create time: a job naming a missing
  dataset or an evaluator that is not ``ACTIVE`` is accepted and then fails; W&B settings are not checked;
- what an evaluator without code shows (``STATE_UNSPECIFIED`` here), what deleting an evaluator does to a
  running job (here the job fails at its next epoch), when chunking starts without ``chunkSize``
  (here above 300 rows, 200 a chunk, the SDK docstring's numbers), and which states can be resumed (here
  ``FAILED`` only, as the firectl page says);
- failures: a job fails only when its evaluator, dataset or pytest run does, when the server stops while
  it runs (``ABORTED``), or when ``--fail-epoch K`` asks the first attempt of every job to fail with
  ``RESOURCE_EXHAUSTED`` at epoch K, a stand-in for the platform-side capacity failures of the field notes;
- missing chunks and archival: when the platform loses a chunk of an epoch's rollouts, or archives a job,
  is not documented. On request (``--drop-chunk K:N``: chunk N of epoch K is never written; ``--archive-epoch
  K``: a job reaching epoch K becomes ``JOB_STATE_ARCHIVED``, terminal and not resumable) the plane shows
  the clients both outcomes in the documented shapes (``-chunk-<n>`` names, the ``ARCHIVED`` state name).
"""
