"""TF2 MultiWorkerMirroredStrategy: synchronous all-reduce across workers, no parameter servers.

The cluster comes from TF_CONFIG. Every worker runs the same custom training loop (`strategy.run`
and `strategy.reduce`; Keras 3's `model.fit` fails under this strategy on TF 2.21). Variables use
MEAN aggregation, so each replica's update is averaged across workers. Progress is printed like
Keras `fit(verbose=2)`:

    Epoch 3/10
    28/28 - 0s - 5ms/step - loss: 0.3100

and `loss` and `steps_per_sec` go to $TOWERDECK_TB_DIR as TensorBoard tensor summaries.

With `--checkpoint_dir` it backs up at the end of every epoch and restores the newest backup at
start, redoing the unfinished epoch, as Keras' `BackupAndRestore` does for `fit()` (which Keras 3
cannot run under this strategy). Every worker saves (the tutorial's rule for this strategy), the
chief into `--checkpoint_dir` and the others into a `workertemp_<index>` folder there that they
delete again; every worker restores the chief's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

from common import add_common_arguments, load_digits, open_summaries, resumed, summaries_failed, tensorboard_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser)
    args = parser.parse_args()

    import tensorflow as tf

    summary_errors = (tf.errors.OpError, RuntimeError, OSError)  # a summary write that failed (full disk)

    tf.debugging.set_log_device_placement(args.log_device_placement)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    x_all, y_all = load_digits()
    global_batch = args.batch_size * strategy.num_replicas_in_sync

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch = context.get_per_replica_batch_size(global_batch)
        data = tf.data.Dataset.from_tensor_slices((x_all, y_all))
        data = data.shard(context.num_input_pipelines, context.input_pipeline_id)
        return data.shuffle(2048, seed=context.input_pipeline_id).repeat().batch(batch)

    dist_dataset = strategy.distribute_datasets_from_function(dataset_fn)
    mean = tf.VariableAggregation.MEAN
    with strategy.scope():
        init = tf.keras.initializers.GlorotUniform(seed=1)
        w1 = tf.Variable(init([64, args.hidden]), name="hidden_weights", aggregation=mean)
        b1 = tf.Variable(tf.zeros([args.hidden]), name="hidden_biases", aggregation=mean)
        w2 = tf.Variable(init([args.hidden, 10]), name="softmax_weights", aggregation=mean)
        b2 = tf.Variable(tf.zeros([10]), name="softmax_biases", aggregation=mean)
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    variables = [w1, b1, w2, b2]
    cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    is_chief = task.get("type", "worker") == "chief" or (task.get("index", 0) == 0 and "chief" not in cluster)
    checkpoint = tf.train.Checkpoint(w1=w1, b1=b1, w2=w2, b2=b2, global_step=global_step)
    manager = None
    if args.checkpoint_dir:
        own_dir = (
            args.checkpoint_dir if is_chief else os.path.join(args.checkpoint_dir, f"workertemp_{task.get('index', 0)}")
        )
        manager = tf.train.CheckpointManager(checkpoint, own_dir, max_to_keep=5)
        latest = tf.train.latest_checkpoint(args.checkpoint_dir)
        if latest:
            checkpoint.restore(latest)
            resumed(latest, int(global_step.numpy()))

    @tf.function
    def train_step(iterator: tf.distribute.DistributedIterator) -> tf.Tensor:
        def step_fn(inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
            x, y = inputs
            with tf.GradientTape() as tape:
                logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            for var, grad in zip(variables, tape.gradient(loss, variables), strict=True):
                var.assign_sub(args.learning_rate * grad)
            return loss

        losses = strategy.run(step_fn, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

    iterator = iter(dist_dataset)
    tb_dir = tensorboard_dir()
    writer = open_summaries(lambda: tf.summary.create_file_writer(tb_dir), summary_errors) if tb_dir else None
    steps_per_epoch = max(1, args.log_every)
    epochs = max(1, args.train_steps // steps_per_epoch)
    loss_value = float("nan")
    step = int(global_step.numpy())
    for epoch in range(step // steps_per_epoch + 1, epochs + 1):
        print(f"Epoch {epoch}/{epochs}", flush=True)
        start = time.time()
        for _ in range(steps_per_epoch):
            # A step marker: TensorFlow's profiler (`ctl RUN profile`) counts and times steps by it.
            with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
                loss_value = float(train_step(iterator))
                if args.step_sleep:
                    time.sleep(args.step_sleep)
            step += 1
        if manager is not None:  # a backup at the end of the epoch, as BackupAndRestore(save_freq="epoch")
            global_step.assign(step)
            manager.save(checkpoint_number=step)
            if not is_chief:  # its copy only took part in the save
                shutil.rmtree(manager.directory, ignore_errors=True)
        elapsed = time.time() - start
        ms_per_step = 1000.0 * elapsed / steps_per_epoch
        print(
            f"{steps_per_epoch}/{steps_per_epoch} - {int(elapsed)}s - {ms_per_step:.0f}ms/step - loss: {loss_value:.4f}",
            flush=True,
        )
        if writer is not None:
            try:
                with writer.as_default():
                    tf.summary.scalar("loss", loss_value, step=step)
                    tf.summary.scalar("steps_per_sec", steps_per_epoch / max(elapsed, 1e-9), step=step)
                writer.flush()
            except summary_errors as exc:
                summaries_failed(writer, exc)
                writer = None
    print(
        f"{task.get('type', 'worker')} {task.get('index', 0)} done: {step} steps, final loss {loss_value:.4f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
