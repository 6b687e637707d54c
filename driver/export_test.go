package driver

import "time"

// ScheduleTickIntervalOf is the ScheduleTickInterval NewClient would use for cfg, after
// defaults.
func ScheduleTickIntervalOf(cfg *Config) (time.Duration, error) {
	c, err := cfg.validate()
	if err != nil {
		return 0, err
	}
	return c.ScheduleTickInterval, nil
}
