#!/usr/bin/env python3
"""examples/actor_trainer: a CAF program whose trainer actor sums gradients
by messages to the communicator's actor (include/mccl/comm_actor.hpp).

* 3 ranks train 30 steps: every rank ends with the same weights (the
  gradients were averaged across ranks), the loss falls, and each exits 0;
* rank 2 is SIGKILLed mid-training: ranks 0 and 1 learn of it from a
  message (the error answering their request, or the down message of the
  communicator's actor), print it naming rank 2, and exit 3 within a
  bounded time; neither hangs.

Ranks are started by the harness of faults_test.py (each in its own session,
killed and reaped on every exit path); every wait is bounded.
"""

import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults_test import STARTUP_TIMEOUT, Rank, RankTest, free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINER = os.path.abspath(
    os.environ.get("ACTOR_TRAINER")
    or os.path.join(HERE, "..", "..", "build", "examples", "actor_trainer"))
RUN_BOUND = 90.0
# A SIGKILLed peer's connection closes at once; the survivors' abort follows
# within the engine's loss grace. Far above that for a loaded CI machine.
KILL_NAMED_WITHIN = 10.0


class ActorTrainerTest(RankTest):
    def start_trainers(self, world, args, extra_env=None):
        port = free_port()
        ranks = [Rank(r, world, port, args, extra_env, program=TRAINER) for r in range(world)]
        self.ranks.extend(ranks)
        return ranks

    @classmethod
    def setUpClass(cls):
        if not os.access(TRAINER, os.X_OK):
            raise AssertionError(f"actor_trainer not found at {TRAINER}; build it or set ACTOR_TRAINER")

    def test_three_ranks_train_to_the_same_weights(self):
        ranks = self.start_trainers(3, ["30"])
        for r in ranks:
            self.assertTrue(r.wait_exit(RUN_BOUND), f"rank {r.rank} did not finish:\n{r.describe()}")
        weights = set()
        for r in ranks:
            self.assertEqual(r.returncode, 0, r.describe())
            done = r.find_line(r"done: w =")
            self.assertIsNotNone(done, r.describe())
            weights.add(done[1].split("done: w =")[1].strip())
            losses = [float(m.group(1)) for _, line in [(0, x) for x in r.output("stdout").splitlines()]
                      for m in [re.search(r"step \d+ loss ([0-9.]+)", line)] if m]
            self.assertEqual(len(losses), 3, r.describe())  # steps 0, 10, 20
            self.assertLess(losses[-1], losses[0] / 5, f"rank {r.rank}'s loss did not fall: {losses}")
        self.assertEqual(len(weights), 1, f"the ranks ended with different weights: {weights}")

    def test_a_killed_peer_reaches_the_trainers_as_a_message(self):
        # Paced steps (20 ms), so the kill lands mid-training.
        ranks = self.start_trainers(3, ["2000", "20"], {"MCCL_TIMEOUT_MS": "30000"})
        for r in ranks:
            seen = r.wait_for_line(r"step 10 loss", STARTUP_TIMEOUT)
            self.assertIsNotNone(seen, f"rank {r.rank} did not reach step 10:\n{r.describe()}")
        killed_at = time.monotonic()
        ranks[2].kill()
        for r in ranks[:2]:
            self.assertTrue(r.wait_exit(KILL_NAMED_WITHIN + 5.0),
                            f"rank {r.rank} still running after rank 2 was killed:\n{r.describe()}")
        for r in ranks[:2]:
            took = r.exit_time - killed_at
            said = r.find_line(r"(failed|the communicator ended) at step|step \d+ failed")
            self.assertIsNotNone(said, f"rank {r.rank} exited without saying why:\n{r.describe()}")
            self.assertIn("rank 2", said[1], f"rank {r.rank} did not name rank 2: {said[1]}")
            self.assertEqual(r.returncode, 3, r.describe())
            self.assertLess(took, KILL_NAMED_WITHIN, f"rank {r.rank} took {took:.1f} s:\n{r.describe()}")
            print(f"  rank {r.rank} exited {took:.2f} s after the kill: {said[1]}", file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
