from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    name = "experiments"
    verbose_name = "Datasets and experiments"

    def ready(self) -> None:
        # The driver (harness, below this app) sets up experiment runs through this hook.
        from experiments.services import experiment_setup
        from harness.engine.driver import set_experiment_setup

        set_experiment_setup(experiment_setup)
