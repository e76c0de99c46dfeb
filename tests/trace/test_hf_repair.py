"""Inputs corrected from what a model's forward pass says (attn_doctor/tracing/runs/hf_repair.py), on the
messages transformers' models raise: each repair reads the message, never a list of models."""
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from attn_doctor.tracing.runs.hf_repair import _repair  # noqa: E402


def _state(**config):
    image = SimpleNamespace(kwargs={})
    return {"image": image, "count": None, "audio": (), "audio_count": 0, "config": SimpleNamespace(**config),
            "seq_len": 16, "device": "cpu", "dtype": torch.float32, "text_token": 5}


def test_an_image_size_the_model_names_is_the_one_made():
    pixels = torch.ones(1, 3, 224, 224)
    state = _state()
    fixed = _repair({"pixel_values": pixels}, ValueError("Input image size (224*224) doesn't match model (256*192)."), state)
    assert fixed["pixel_values"].shape == (1, 3, 256, 192) and state["image"].kwargs["pixel_values"] is fixed["pixel_values"]
    fixed = _repair({"pixel_values": pixels}, AssertionError("Input height (224) doesn't match model (336)."), _state())
    assert fixed["pixel_values"].shape == (1, 3, 336, 336)


def test_a_video_model_gets_its_configs_frames():
    fixed = _repair({"pixel_values": torch.ones(1, 3, 224, 224)}, ValueError("not enough values to unpack (expected 5, got 4)"),
                    _state(num_frames=16))
    assert fixed["pixel_values"].shape == (1, 16, 3, 224, 224)


def test_arguments_the_forward_says_it_misses_are_made_from_their_names():
    ids = torch.full((1, 16), 5)
    exc = TypeError("InstructBlipForConditionalGeneration.forward() missing 2 required positional arguments: "
                    "'qformer_input_ids' and 'qformer_attention_mask'")
    fixed = _repair({"input_ids": ids}, exc, _state(hidden_size=32))
    assert torch.equal(fixed["qformer_input_ids"], ids) and fixed["qformer_attention_mask"].shape == (1, 16)
    exc = TypeError("VibeVoiceAcousticTokenizerDecoderModel.forward() missing 1 required positional argument: 'hidden_states'")
    assert _repair({"input_ids": ids}, exc, _state(hidden_size=32))["hidden_states"].shape == (1, 16, 32)
    # a name that says nothing about what it holds is not guessed
    exc = TypeError("SegGptModel.forward() missing 2 required positional arguments: 'prompt_pixel_values' and 'prompt_masks'")
    assert _repair({"input_ids": ids}, exc, _state(hidden_size=32)) is None


def test_a_waveform_model_given_a_spectrogram_gets_a_waveform_and_a_codec_its_channel():
    # SpeechT5 has num_mel_bins (its decoder's) but its encoder convolves the raw waveform
    state = dict(_state(), audio=("input_values",))
    exc = RuntimeError("Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: [1, 1, 128, 80]")
    fixed = _repair({"input_values": torch.zeros(1, 128, 80)}, exc, state)
    assert fixed["input_values"].shape == (1, 16000)
    assert _repair(fixed, exc, state) is None  # said once: the same message again is not repaired twice
    # a codec counts channels: [batch, 1, samples]
    state = dict(_state(), audio=("input_values",))
    fixed = _repair({"input_values": torch.zeros(1, 16000)}, ValueError("Audio must be mono, but got 16000"), state)
    assert fixed["input_values"].shape == (1, 1, 16000)
    # the same words about another tensor than the one made: nothing
    assert _repair({"input_values": torch.zeros(1, 8000)}, ValueError("Audio must be mono, but got 16000"),
                   dict(_state(), audio=("input_values",))) is None


def test_an_encoder_decoder_that_takes_either_audio_input_gets_its_encoders():
    # SpeechEncoderDecoderModel's main input is `inputs`; its forward takes input_values and
    # input_features; a wav2vec2 encoder convolves the waveform: input_values, [batch, samples]
    transformers = pytest.importorskip("transformers")
    from attn_doctor.tracing.runs.hf_inputs import make_inputs

    encoder = transformers.Wav2Vec2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                          conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_feat_extract_layers=2)
    decoder = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                      vocab_size=100, is_decoder=True, add_cross_attention=True)
    config = transformers.SpeechEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    config.decoder_start_token_id, config.pad_token_id = 1, 0
    model = transformers.SpeechEncoderDecoderModel(config=config)
    kwargs = make_inputs(model, config, 16, "cpu")[0]
    assert "input_values" in kwargs and kwargs["input_values"].dim() == 2 and "input_features" not in kwargs
