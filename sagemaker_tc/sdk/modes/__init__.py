"""How ``fit()`` runs a job, one module per mode.

- :mod:`.process`: ``local_process``, this host with no Docker (:mod:`sagemaker_tc.sdk.local_process`);
- :mod:`.docker`: ``local`` / ``local_gpu``, sagemaker-core's Docker engine (:mod:`sagemaker_tc.sdk.local_docker`);
- :mod:`.training_job`: a SageMaker training job (``ml.*``) through sagemaker-core (:mod:`sagemaker_tc.sdk.cloud`);
- :mod:`.pipeline`: under a ``PipelineSession``, the same request handed to a Pipelines step.

Each takes the estimator whose arguments were checked at construction, stages its source and
builds the request with the estimator's ``_build_request``; none of them changes the estimator:
``fit()`` records what they return (``latest_training_job``; ``model_data`` is read from the job).
"""
