<?php
// PHP 8.2 fibers for the switch-function path (suite_19_runtimes.py): N fibers,
// each resumed K + 1 times (started, then resumed after each of its K suspends).
// PHP switches them with Boost.Context's assembly built into the php binary
// (make_fcontext, jump_fcontext). With --wait it says READY and waits for a
// line on stdin first, so a tracer can attach. Prints its own counts: the
// trace must hold exactly these.
$args = array_slice($argv, 1);
$wait = in_array("--wait", $args, true);
$args = array_values(array_filter($args, fn($a) => $a !== "--wait"));
$n = (int)($args[0] ?? 100);
$k = (int)($args[1] ?? 10);
if ($wait) {
    echo "READY " . getmypid() . "\n";
    fflush(STDOUT);
    fgets(STDIN);
}
$resumes = 0;
$fibers = [];
for ($i = 0; $i < $n; $i++) {
    $fibers[] = new Fiber(function () use ($k) {
        for ($j = 0; $j < $k; $j++)
            Fiber::suspend();
    });
}
foreach ($fibers as $f) {
    $f->start();
    $resumes++;
    for ($j = 0; $j < $k; $j++) {
        $f->resume();
        $resumes++;
    }
}
$alive = count(array_filter($fibers, fn($f) => !$f->isTerminated()));
echo "FIBERS $n RESUMES $resumes SWITCHES " . (2 * $resumes) . " ALIVE $alive\n";
