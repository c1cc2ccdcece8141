"""Binary PU tasks: which original classes are positive (paper 000, Appendix B.1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pucl.errors import look_up


@dataclass(frozen=True)
class Task:
    name: str
    positive: tuple[int, ...]
    negative: tuple[int, ...] | None = None  # None: every class that is not positive

    def keep(self, labels: np.ndarray) -> np.ndarray:
        """Rows that take part in the task (tasks such as CIFAR-0 drop other classes)."""
        if self.negative is None:
            return np.ones(len(labels), dtype=bool)
        return np.isin(labels, self.positive + self.negative)

    def binarize(self, labels: np.ndarray) -> np.ndarray:
        return np.isin(labels, self.positive).astype(np.int64)


TASKS: dict[str, Task] = {
    t.name: t
    for t in [
        Task("mnist-i", (0, 2, 4, 6, 8)),
        Task("mnist-ii", (0, 1, 2, 3, 4, 5, 6)),  # digits 0-6: prior about 0.7
        Task("fmnist-i", (1, 4, 7)),  # trouser, coat, sneaker: prior 0.3
        Task("fmnist-ii", (0, 2, 3, 5, 6, 8, 9)),  # prior 0.7
        Task("cifar-i", (0, 1, 8, 9)),  # vehicles: prior 0.4
        Task("cifar-ii", (2, 3, 4, 5, 6, 7)),  # animals: prior 0.6
        Task("cifar-iii", (0, 1, 8, 9)),  # CIFAR-I's classes, Table 4's protocol
        Task("cifar-0", (5,), (3,)),  # dog vs cat
        Task("cifar-hard", (0, 3), (2, 5)),  # airplane, cat vs bird, dog
        Task("cifar-medium", (0, 3, 5), (2,)),
        Task("cifar-easy", (0, 2), (3, 5)),
        Task("stl-i", (0, 2, 3, 8, 9)),
        Task("stl-ii", (1, 4, 5, 6, 7)),
        Task("stl-iii", (0, 2, 8, 9), (1, 3, 4, 5, 6, 7)),
        Task("svhn-i", (0, 2, 4, 6, 8)),  # even digits
        Task("given", (1,)),  # bring-your-own data: the file's binary labels (-1 unknown)
    ]
}


def get_task(name: str) -> Task:
    return look_up(TASKS, name, "task")
