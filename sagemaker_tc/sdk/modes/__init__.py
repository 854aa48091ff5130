"""How ``fit()`` runs a job, one module per mode.

- :mod:`.process`: ``local_process``, this host with no Docker (:mod:`sagemaker_tc.sdk.local.process`);
- :mod:`.docker`: ``local`` / ``local_gpu``, sagemaker-core's Docker engine (:mod:`sagemaker_tc.sdk.local.docker`);
- :mod:`.training_job`: a SageMaker training job (``ml.*``) through sagemaker-core (:mod:`sagemaker_tc.sdk.cloud`);
- :mod:`.pipeline`: under a ``PipelineSession``, the same request handed to a Pipelines step.

Each takes values, never the estimator: the request the estimator built (every field but where the
code is), the source to ship and the few settings it reads (:class:`.training_job.CloudArguments`).
A mode stages the source, fills in the request's submit directory
(:func:`~sagemaker_tc.sdk.request.with_submit_directory`) and runs it; ``fit()`` records what it
returns (``latest_training_job``; ``model_data`` is read from the job). No module here imports the
estimator module.
"""
