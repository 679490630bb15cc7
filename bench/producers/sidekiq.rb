# Sidekiq's side of bench/producers/run.py: Sidekiq::Client.push one at a
# time (a scheduled job, 'at' 30 minutes ahead: the sorted set Sidekiq keeps
# for delayed jobs), or push_bulk in calls of 1000, same payload.
require 'sidekiq'

target, n, mode = ARGV
host, port = target.split(':')
n = Integer(n)
BULK = 1000
Sidekiq.configure_client { |c| c.redis = { url: "redis://#{host}:#{port}/0" } }
job = { 'class' => 'OrderCancel', 'queue' => 'bench', 'args' => [{ 'order' => 1234 }] }
client = Sidekiq::Client.new
client.push(job.merge('at' => Time.now.to_f + 1800))
puts 'ready'
$stdout.flush
$stdin.gets
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
if mode == 'one'
  n.times { client.push(job.merge('at' => Time.now.to_f + 1800)) }
else
  (0...n).step(BULK) do |done|
    k = [BULK, n - done].min
    at = Time.now.to_f + 1800
    client.push_bulk('class' => 'OrderCancel', 'queue' => 'bench',
                     'args' => Array.new(k) { [{ 'order' => 1234 }] }, 'at' => Array.new(k, at))
  end
end
puts format('%.6f', Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0)
