from typing import Any

from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    name = "experiments"
    verbose_name = "Datasets and experiments"

    def ready(self) -> None:
        from experiments.recorded import experiment_setup
        from harness.engine.experiment_seam import register_experiment_setup
        from traces.services import runs_expired

        register_experiment_setup(experiment_setup)
        runs_expired.connect(_forget_expired_runs, dispatch_uid="experiments.forget_expired")


def _forget_expired_runs(sender: Any, request_ids: list[str], **kwargs: Any) -> None:
    """Retention deleted these runs' audit: the dataset items copying them go too."""
    from experiments.datasets import forget_runs

    forget_runs(request_ids)
