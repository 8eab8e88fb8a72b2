"""TF2 ParameterServerStrategy: a chief runs a ClusterCoordinator; workers and ps only serve.

The cluster comes from TF_CONFIG. Workers and ps tasks run `tf.distribute.Server(...).join()` and
never exit by themselves; the launcher stops them once the chief has finished. The chief
schedules steps onto the workers (asynchronous updates of variables that live on the ps tasks)
and prints progress in the format of TF1's logging hooks

    loss = 0.31, step = 100 (0.523 sec)
    global_step/sec: 191.2

and writes `loss` and `steps_per_sec` as TensorBoard tensor summaries to $TOWERDECK_TB_DIR.

With `--checkpoint_dir` the chief saves the variables (they live on the ps) with a
`tf.train.CheckpointManager` every `--checkpoint_every` steps, as `ckpt-<step>`, and restores the
newest at start: TensorFlow's parameter-server tutorial restarts the coordinator with a lost ps
"so that it's able to reconnect to the new parameter server and restore from a checkpoint".
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from common import add_common_arguments, load_digits, open_summaries, resumed, summaries_failed, tensorboard_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser)
    args = parser.parse_args()
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

    import tensorflow as tf

    summary_errors = (tf.errors.OpError, RuntimeError, OSError)  # a summary write that failed (full disk)

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("worker", "ps"):
        server = tf.distribute.Server(
            resolver.cluster_spec(),
            job_name=resolver.task_type,
            task_index=resolver.task_id,
            protocol=resolver.rpc_layer or "grpc",
            start=True,
        )
        print(f"{resolver.task_type} {resolver.task_id} serving", flush=True)
        server.join()
        return 0
    if resolver.task_type != "chief":
        print(f"task type {resolver.task_type!r} has nothing to do under ParameterServerStrategy", flush=True)
        return 0

    tf.debugging.set_log_device_placement(args.log_device_placement)
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    x_all, y_all = load_digits()

    def dataset_fn() -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices((x_all, y_all)).shuffle(2048).repeat().batch(args.batch_size)

    with strategy.scope():
        init = tf.keras.initializers.GlorotUniform(seed=1)
        w1 = tf.Variable(init([64, args.hidden]), name="hidden_weights")
        b1 = tf.Variable(tf.zeros([args.hidden]), name="hidden_biases")
        w2 = tf.Variable(init([args.hidden, 10]), name="softmax_weights")
        b2 = tf.Variable(tf.zeros([10]), name="softmax_biases")
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    variables = [w1, b1, w2, b2]
    manager = None
    first_step = 1
    if args.checkpoint_dir:
        checkpoint = tf.train.Checkpoint(w1=w1, b1=b1, w2=w2, b2=b2, global_step=global_step)
        manager = tf.train.CheckpointManager(checkpoint, args.checkpoint_dir, max_to_keep=5)
        if manager.latest_checkpoint:
            checkpoint.restore(manager.latest_checkpoint)
            first_step = int(global_step.numpy()) + 1
            resumed(manager.latest_checkpoint, first_step - 1)

    @tf.function
    def train_step(iterator: tf.distribute.DistributedIterator) -> tf.Tensor:
        def step_fn(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            for var, grad in zip(variables, tape.gradient(loss, variables), strict=True):
                var.assign_sub(args.learning_rate * grad)
            return loss

        x, y = next(iterator)
        losses = strategy.run(step_fn, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    tb_dir = tensorboard_dir()
    writer = open_summaries(lambda: tf.summary.create_file_writer(tb_dir), summary_errors) if tb_dir else None
    window_start = time.time()
    loss_value = float("nan")
    for step in range(first_step, args.train_steps + 1):
        # A step marker: TensorFlow's profiler (`ctl RUN profile`) counts and times the chief's steps
        # by it (workers and ps only serve: their profiles show ops, not steps).
        with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
            result = coordinator.schedule(train_step, args=(iterator,))
            if args.step_sleep:
                time.sleep(args.step_sleep)
        if step % args.log_every == 0 or step == args.train_steps:
            coordinator.join()
            loss_value = float(result.fetch())
            elapsed = time.time() - window_start
            steps_per_sec = args.log_every / max(elapsed, 1e-9)
            print(f"loss = {loss_value:.4f}, step = {step} ({elapsed:.3f} sec)", flush=True)
            print(f"global_step/sec: {steps_per_sec:.2f}", flush=True)
            if writer is not None:
                try:
                    with writer.as_default():
                        tf.summary.scalar("loss", loss_value, step=step)
                        tf.summary.scalar("steps_per_sec", steps_per_sec, step=step)
                    writer.flush()
                except summary_errors as exc:
                    summaries_failed(writer, exc)
                    writer = None
            window_start = time.time()
        every = args.checkpoint_every
        if manager is not None and ((every > 0 and step % every == 0) or step == args.train_steps):
            coordinator.join()  # the variables as of this step, every scheduled step done
            global_step.assign(step)
            manager.save(checkpoint_number=step)
    coordinator.join()
    print(f"chief done: {args.train_steps} steps, final loss {loss_value:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
