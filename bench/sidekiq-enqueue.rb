# Sidekiq's producer side for bench/clients-enqueue.py: N jobs of the same
# 32-byte payload, due in 30 minutes, one Sidekiq::Client.push at a time or
# in one push_bulk.  ruby sidekiq-enqueue.rb SOCKET one|bulk N; prints the
# seconds the N jobs took.
require 'sidekiq'

sock, mode, n = ARGV[0], ARGV[1], ARGV[2].to_i
Sidekiq.configure_client { |c| c.redis = { path: sock } }
payload = '0123456789abcdef0123456789abcdef'
at = Time.now.to_f + 1800
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
if mode == 'one'
  n.times { Sidekiq::Client.push('class' => 'OrderCancel', 'args' => [payload], 'at' => at) }
else
  # push_bulk takes at most 1000 jobs by default in later versions; give them all
  Sidekiq::Client.push_bulk('class' => 'OrderCancel', 'args' => Array.new(n) { [payload] },
                            'at' => Array.new(n) { at }, 'batch_size' => n)
end
printf("%.6f\n", Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0)
