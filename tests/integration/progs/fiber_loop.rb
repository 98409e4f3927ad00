# A fiber event loop as Ruby programs write one without a gem (suite_28_precision.py): six
# fibers, each reading lines from its own pipe with read_nonblock and yielding the pipe to
# the main fiber when it is empty; the main fiber resumes every fiber whose pipe is readable
# and, when none is, waits in IO.select: the loop waiting for work, in the kernel. Healthy,
# no fiber ever blocks its thread.
#
#     fiber_loop.rb [--plant] idle|load SECONDS
#
# load: a feeder thread writes a line to one of the pipes every 5 ms; idle: nothing comes.
# Prints "READY <pid>" when the loop starts and "DONE <lines read>" after SECONDS.
# --plant: one second in, a seventh fiber reads a pipe with a blocking read, which a thread
# fills 300 ms later, while lines wait for the other fibers: the bug. Prints
# "PLANTED blocking <start> <end>" (CLOCK_BOOTTIME ns, corobpf's clock) around that read.
plant = ARGV.delete("--plant")
mode = ARGV[0] || "load"
secs = (ARGV[1] || 3).to_f
now = -> { Process.clock_gettime(Process::CLOCK_BOOTTIME, :nanosecond) }
lines = 0
pipes = Array.new(6) { IO.pipe }
fibers = pipes.map do |r, _|
  Fiber.new do
    loop do
      got = r.read_nonblock(4096, exception: false)
      if got == :wait_readable
        Fiber.yield(r)
      else
        lines += got.count("\n")
      end
    end
  end
end
if mode == "load"
  Thread.new do
    i = 0
    loop do
      pipes[i % pipes.size][1].write("line #{i}\n")
      i += 1
      sleep 0.005
    end
  end
end
planted = nil
if plant
  slow_r, slow_w = IO.pipe
  planted = Fiber.new do
    t0 = now.call
    slow_r.read(1)
    t1 = now.call
    puts "PLANTED blocking #{t0} #{t1}"
    $stdout.flush
    nil
  end
  Thread.new do
    # The planted read starts at 1 s; lines come for every other fiber while it blocks.
    sleep 1.1
    pipes.each { |_, w| w.write("queued\n") }
    sleep 0.2
    slow_w.write("x")
  end
end
puts "READY #{Process.pid}"
$stdout.flush
start = now.call
deadline = start + (secs * 1e9).to_i
ready = fibers.dup
waiting = {}
while now.call < deadline
  while (f = ready.shift)
    io = f.resume
    waiting[io] = f if io.is_a?(IO)
  end
  if planted && now.call - start > 1_000_000_000
    planted.resume
    planted = nil
  end
  left = (deadline - now.call) / 1e9
  break if left <= 0
  rs, = IO.select(waiting.keys, nil, nil, plant && planted ? [left, 0.05].min : left)
  (rs || []).each { |io| ready << waiting.delete(io) }
end
puts "DONE #{lines}"
