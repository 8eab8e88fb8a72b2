"""Between-graph replication in the classic style: parameter servers and workers.

Every worker builds the same graph; `replica_device_setter` puts the variables on the ps tasks;
worker 0 is the chief. The cluster comes from the legacy flags:

    python between_graph.py --ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 \
        --job_name=worker --task_index=0

A ps task serves forever (`server.join()`); the launcher stops it when the workers are done. Each
worker prints the classic example's progress line

    Step: 201,  Epoch:  1,  Batch: 100 of 550,  Cost: 8.2541,  AvgTime: 3.04ms

and writes `loss` and `steps_per_sec` as TensorBoard scalars (simple_value) to $TOWERDECK_TB_DIR.

With `--checkpoint_dir` the chief's MonitoredTrainingSession saves `model.ckpt-<global step>` there
every `--checkpoint_every` steps and, at start, restores the newest (the variables live on the ps:
after a ps is lost every role restarts and the chief restores them).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np
from common import add_common_arguments, load_digits, open_summaries, resumed, summaries_failed, tensorboard_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ps_hosts", required=True, help="comma-separated host:port")
    parser.add_argument("--worker_hosts", required=True, help="comma-separated host:port")
    parser.add_argument("--job_name", required=True, choices=("ps", "worker"))
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument(
        "--ready_wait",
        choices=("poll", "monitored"),
        default="poll",
        help="how a non-chief waits for the chief's variables: poll (default), or monitored: "
        "MonitoredTrainingSession's own 30 s checks, as the classic examples do (can wait forever)",
    )
    parser.add_argument(
        "--chief_start_delay_s",
        type=float,
        default=0.0,
        help="the chief sleeps this long before initialising (makes a non-chief's first check find nothing)",
    )
    parser.add_argument(
        "--handshake_dir",
        default="",
        help="with --chief_start_delay_s: each non-chief writes a file here just before its session starts, "
        "and the chief waits for all of them before its delay (a deterministic first check, for tests)",
    )
    parser.add_argument(
        "--tf_verbosity",
        choices=("default", "info"),
        default="default",
        help="info: TensorFlow's Python INFO logs too (e.g. 'Waiting for model to be ready')",
    )
    parser.add_argument(
        "--input",
        choices=("feed", "dataset"),
        default="feed",
        help="feed: numpy batches through feed_dict (default); dataset: a tf.data pipeline, whose wait "
        "TensorFlow's profiler counts as input",
    )
    parser.add_argument(
        "--input_sleep_s",
        type=float,
        default=0.0,
        help="with --input=dataset: each batch sleeps this long in the pipeline (a worker made slow in its "
        "input on purpose, for `ctl RUN why`)",
    )
    add_common_arguments(parser)
    args = parser.parse_args()
    if args.input_sleep_s > 0 and args.input != "dataset":
        parser.error("--input_sleep_s needs --input=dataset")

    import tensorflow as tf

    summary_errors = (tf.errors.OpError, RuntimeError, OSError)  # a summary write that failed (full disk)

    if args.tf_verbosity == "info":
        tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)

    tf.compat.v1.disable_eager_execution()
    cluster = tf.train.ClusterSpec({"ps": args.ps_hosts.split(","), "worker": args.worker_hosts.split(",")})
    config = tf.compat.v1.ConfigProto(log_device_placement=args.log_device_placement)
    server = tf.distribute.Server(cluster, job_name=args.job_name, task_index=args.task_index, config=config)
    if args.job_name == "ps":
        print(f"ps {args.task_index} serving on {cluster.task_address('ps', args.task_index)}", flush=True)
        server.join()
        return 0

    x_all, y_all = load_digits()
    n_train = len(x_all) - 297
    x_train, y_train = x_all[:n_train], y_all[:n_train]
    batches_per_epoch = n_train // args.batch_size
    is_chief = args.task_index == 0
    worker_device = f"/job:worker/task:{args.task_index}"
    with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(worker_device=worker_device, cluster=cluster)):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        if args.input == "dataset":
            images, labels = dataset_batches(tf, x_train, y_train, args)
            x = tf.compat.v1.placeholder_with_default(images, [None, 64], name="images")
            y = tf.compat.v1.placeholder_with_default(labels, [None], name="labels")
        else:
            x = tf.compat.v1.placeholder(tf.float32, [None, 64], name="images")
            y = tf.compat.v1.placeholder(tf.int64, [None], name="labels")
        init = tf.compat.v1.glorot_uniform_initializer(seed=args.task_index)
        w1 = tf.compat.v1.get_variable("hidden/weights", [64, args.hidden], initializer=init)
        b1 = tf.compat.v1.get_variable("hidden/biases", [args.hidden], initializer=tf.compat.v1.zeros_initializer())
        w2 = tf.compat.v1.get_variable("softmax/weights", [args.hidden, 10], initializer=init)
        b2 = tf.compat.v1.get_variable("softmax/biases", [10], initializer=tf.compat.v1.zeros_initializer())
        hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
        logits = tf.matmul(hidden, w2) + b2
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="cost")
        train_op = tf.compat.v1.train.GradientDescentOptimizer(args.learning_rate).minimize(
            loss, global_step=global_step
        )

    if is_chief and args.chief_start_delay_s > 0:
        others = [i for i in range(len(args.worker_hosts.split(","))) if i != 0]
        deadline = time.time() + 300
        while args.handshake_dir and time.time() < deadline:
            if all(os.path.exists(os.path.join(args.handshake_dir, f"worker-{i}")) for i in others):
                break
            time.sleep(0.1)
        time.sleep(args.chief_start_delay_s)
    if not is_chief and args.handshake_dir:
        with open(os.path.join(args.handshake_dir, f"worker-{args.task_index}"), "w") as marker:
            marker.write("about to create its session\n")
    if not is_chief and args.ready_wait == "poll":
        # MonitoredTrainingSession's non-chief waits in 30 s sleeps for the chief to initialise
        # the variables; poll instead so a worker starts training as soon as they exist.
        not_ready = tf.compat.v1.report_uninitialized_variables()
        with tf.compat.v1.Session(server.target, config=config) as probe:
            while len(probe.run(not_ready)) > 0:
                time.sleep(0.2)

    writer = None
    tb_dir = tensorboard_dir()
    if tb_dir:
        writer = open_summaries(lambda: tf.compat.v1.summary.FileWriter(tb_dir), summary_errors)
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.train_steps)]
    checkpoint_dir = args.checkpoint_dir if is_chief and args.checkpoint_dir else None
    if checkpoint_dir is not None:
        latest = tf.train.latest_checkpoint(checkpoint_dir)
        if latest:  # MonitoredTrainingSession restores it; say so, with its global step
            resumed(latest, int(latest.rsplit("-", 1)[1]))
    rng = np.random.default_rng(args.task_index)
    local_step = 0
    window_start = time.time()
    window_steps = 0
    step = 0
    cost = float("nan")
    with tf.compat.v1.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        hooks=hooks,
        config=config,
        checkpoint_dir=checkpoint_dir,
        save_checkpoint_steps=args.checkpoint_every
        if checkpoint_dir is not None and args.checkpoint_every > 0
        else None,
        save_checkpoint_secs=None,
        save_summaries_steps=None,
        save_summaries_secs=None,
        log_step_count_steps=None,
    ) as sess:
        while not sess.should_stop():
            # A step marker: TensorFlow's profiler (`ctl RUN profile`) counts and times steps by it.
            with tf.profiler.experimental.Trace("train", step_num=local_step, _r=1):
                feed = {}
                if args.input == "feed":
                    batch = rng.integers(0, n_train, args.batch_size)
                    feed = {x: x_train[batch], y: y_train[batch]}
                _, cost, step = sess.run([train_op, loss, global_step], feed)
                if args.step_sleep:
                    time.sleep(args.step_sleep)
            local_step += 1
            window_steps += 1
            if local_step % args.log_every == 0:
                elapsed = time.time() - window_start
                avg_ms = 1000.0 * elapsed / window_steps
                epoch = local_step // batches_per_epoch + 1
                batch_index = local_step % batches_per_epoch
                print(
                    f"Step: {step},  Epoch: {epoch:2d},  Batch: {batch_index} of {batches_per_epoch},  Cost: {cost:.4f},  AvgTime: {avg_ms:.2f}ms",
                    flush=True,
                )
                if writer is not None:
                    summary = tf.compat.v1.Summary(
                        value=[
                            tf.compat.v1.Summary.Value(tag="loss", simple_value=float(cost)),
                            tf.compat.v1.Summary.Value(
                                tag="steps_per_sec", simple_value=window_steps / max(elapsed, 1e-9)
                            ),
                        ]
                    )
                    try:
                        writer.add_summary(summary, int(step))
                        writer.flush()
                    except summary_errors as exc:
                        summaries_failed(writer, exc)
                        writer = None
                window_start, window_steps = time.time(), 0
    if writer is not None:
        try:
            writer.close()
        except summary_errors as exc:
            summaries_failed(None, exc)
    print(
        f"worker {args.task_index} done: {local_step} local steps, global step {step}, final cost {cost:.4f}",
        flush=True,
    )
    return 0


def dataset_batches(tf: Any, x_train: np.ndarray, y_train: np.ndarray, args: argparse.Namespace) -> tuple[Any, Any]:
    """Shuffled training batches from a tf.data pipeline, each ``args.input_sleep_s`` late. The step
    waits for them in ``IteratorGetNext``, which the profiler counts as the step's input time."""
    dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(2048, seed=args.task_index)
    dataset = dataset.repeat().batch(args.batch_size)
    if args.input_sleep_s > 0:

        def slow(images: np.ndarray) -> np.ndarray:
            time.sleep(args.input_sleep_s)
            return images

        dataset = dataset.map(lambda images, labels: (tf.numpy_function(slow, [images], tf.float32), labels))
    images, labels = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
    images.set_shape([None, 64])
    return images, labels


if __name__ == "__main__":
    sys.exit(main())
