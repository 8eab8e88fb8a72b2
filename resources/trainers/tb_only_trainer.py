"""A trainer that reports only through TensorBoard summaries (the usual Keras/TF2 case).

Fits ``y = 3x + 1`` with a real TensorFlow variable and gradient tape and writes ``loss`` (and
``learning_rate``) with ``tf.summary.scalar`` to ``--logdir`` (TowerDeck passes ``{tb_dir}``),
printing no step or loss line at all: TowerDeck must find its progress in the event files.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step_sleep", type=float, default=0.05)
    parser.add_argument("--flush_every", type=int, default=5)
    args, _unknown = parser.parse_known_args(argv)

    import tensorflow as tf

    x = tf.random.stateless_uniform([256, 1], seed=(1, 2))
    y = 3.0 * x + 1.0
    w, b = tf.Variable(0.0), tf.Variable(0.0)
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
    writer = tf.summary.create_file_writer(args.logdir)
    print(f"tensorboard-only trainer: writing summaries to {args.logdir}", flush=True)
    with writer.as_default():
        for step in range(1, args.steps + 1):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(w * x + b - y))
            optimizer.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b], strict=True))
            tf.summary.scalar("loss", loss, step=step)
            tf.summary.scalar("learning_rate", 0.1, step=step)
            if step % args.flush_every == 0:
                writer.flush()
            time.sleep(args.step_sleep)
    writer.flush()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
