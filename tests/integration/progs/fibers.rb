# Ruby fibers for the switch-function path (suite_19_runtimes.py): N fibers,
# each resumed K + 1 times (K yields, then its return). With --wait it says
# READY and waits for a line on stdin first, so a tracer can attach.
# Prints its own counts: the trace must hold exactly these. TRACEPOINT is the
# runtime's own count of fiber switches (TracePoint :fiber_switch), a second
# oracle beside the program's arithmetic.
wait = ARGV.delete("--wait")
n = (ARGV[0] || 100).to_i
k = (ARGV[1] || 10).to_i
if wait
  puts "READY #{Process.pid}"
  $stdout.flush
  $stdin.gets
end
resumes = 0
tp_switches = 0
tp = TracePoint.new(:fiber_switch) { tp_switches += 1 }
tp.enable
fibers = (1..n).map { Fiber.new { k.times { Fiber.yield } } }
fibers.each { |f| (k + 1).times { f.resume; resumes += 1 } }
tp.disable
alive = fibers.count(&:alive?)
puts "FIBERS #{n} RESUMES #{resumes} SWITCHES #{2 * resumes} ALIVE #{alive} TRACEPOINT #{tp_switches}"
