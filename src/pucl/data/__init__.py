"""Datasets, tasks, PU splits and augmentations."""

from pucl.data import mnist5k as _mnist5k  # noqa: F401  (registers the loaders)
from pucl.data import mnist_family as _mnist_family  # noqa: F401
from pucl.data import natural_images as _natural_images  # noqa: F401
from pucl.data import own as _own  # noqa: F401
from pucl.data import tracked as _tracked  # noqa: F401
from pucl.data.catalog import DATASETS, ImageData, check_task, load_dataset
from pucl.data.tasks import TASKS, Task, get_task

__all__ = ["DATASETS", "TASKS", "ImageData", "Task", "check_task", "get_task", "load_dataset"]
