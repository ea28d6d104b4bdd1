from celery import shared_task

from experiments import services


@shared_task(name="experiments.run_item", acks_late=True)
def run_item_task(experiment_item_id: str) -> None:
    """One dataset item of an experiment; redelivery is harmless (``run_item`` claims)."""
    services.run_item(experiment_item_id)
