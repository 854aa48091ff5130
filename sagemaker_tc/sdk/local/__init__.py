"""The local job engine: what runs a training job on this host, for the estimators' local modes
(:mod:`sagemaker_tc.sdk.modes`) and ``ModelTrainer``'s (:mod:`sagemaker_tc.sdk.v3.local`).

- :mod:`.process`: the docker-free ``local_process`` job: lays out ``/opt/ml``-style folders from the
  request and runs each host through the real toolkit; :mod:`.hosts` starts and watches the hosts,
  :mod:`.namespace` gives each a private ``/opt/ml``, :mod:`.checkpoints` syncs checkpoints,
  :mod:`.stop` stops a job the way SageMaker does;
- :mod:`.docker` and :mod:`.docker_job`: ``local`` / ``local_gpu``, the image under sagemaker-core's
  Docker engine;
- :mod:`.job`: :class:`~.job.LocalJob`, the handle of either kind of job.

The engine reads a built :class:`~sagemaker_tc.sdk.request.TrainingJobRequest`; it never imports the
estimators, the run modes or ``ModelTrainer``.
"""
